"""The engine's compute dtype, chosen once at start from the hardware unless asked for.

bf16 pays where the CPU multiplies it natively (AVX-512-BF16 or AMX: oneDNN's bf16 kernels
run several times faster than fp32) and on GPUs that support it; on AVX2-only CPUs bf16 is
emulated and many times slower than fp32, so "auto" stays fp32 there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.kernels.plan import AMX_FLAGS, cpu_class, greedy_prefix
from posttrain.machine import cpu_info

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # either one gives native bf16 dot products
NAMES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class DtypeChoice:
    name: str  # "float32" | "bfloat16"
    reason: str  # why: "asked", or the flags / device that decided "auto"

    @property
    def torch_dtype(self) -> torch.dtype:
        return NAMES[self.name]


def choose_dtype(requested: str, device: torch.device | str = "cpu", flags: list[str] | None = None) -> DtypeChoice:
    """Resolve "auto" | "float32" | "bfloat16"; flags default to this CPU's (/proc/cpuinfo)."""
    if requested in NAMES:
        return DtypeChoice(requested, "asked")
    if requested != "auto":
        raise ValueError(f"dtype must be auto, float32 or bfloat16, not {requested!r}")
    device = torch.device(device)
    if device.type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        return DtypeChoice("bfloat16" if ok else "float32", f"cuda bf16 {'supported' if ok else 'unsupported'}")
    present = set(cpu_info()["all_flags"].split() if flags is None else flags)
    have = [f for f in BF16_FLAGS if f in present]
    if have:
        return DtypeChoice("bfloat16", "cpu has " + "+".join(have))
    return DtypeChoice("float32", "cpu lacks " + " and ".join(BF16_FLAGS))


def cast_copy(model, dtype: torch.dtype):
    """The model with its parameters in `dtype`, as an engine-owned copy (the trainer's model
    stays as it is); buffers such as rotary frequencies keep their precision."""
    import copy

    if next(model.parameters()).dtype == dtype:
        return model
    with torch.inference_mode(False):  # ordinary tensors: they take in-place weight updates
        clone = copy.deepcopy(model)
        for p in clone.parameters():
            p.data = p.data.to(dtype)
    return clone


def greedy_prefix_invariance(dtype: str, batch_invariant: bool, attention: str, device: torch.device,
                             weights: str = "compute") -> tuple[bool, str]:
    """(whether a greedy reply is the same with its prefix cached or computed cold, why), as tested
    (tests/engine/paged/test_vllm_attention.py, test_exact.py); the engine reads it from its kernel
    plan (kernels/plan.py), which decides AMX from /proc/cpuinfo rather than from torch."""
    if device.type != "cpu":
        return greedy_prefix(dtype, device.type, batch_invariant, attention, weights)
    flags = frozenset(cpu_info()["all_flags"].split()) - set(AMX_FLAGS)
    cpu = "amx" if torch.cpu._is_amx_tile_supported() else cpu_class(flags)
    return greedy_prefix(dtype, cpu, batch_invariant, attention, weights)
