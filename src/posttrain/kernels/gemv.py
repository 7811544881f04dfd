"""Our weight-streaming kernels for the engine's linears (fp32, bf16, int8 weights), built from csrc/
at first use; which row counts take them on which CPU is the kernel plan's choice (kernels/plan.py,
docs/engine.md "Kernel plan"; how they work: docs/engine-kernels.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from posttrain.machine import cpu_info

log = logging.getLogger(__name__)

# The engine's linears take each kernel up to this many rows (where the plan takes it at all). fp32 and
# bf16 take every call, prefill too, so that a token's logits have the same bits computed in prefill
# or in decode; int8_lut up to where it beat the bf16 GEMM, the widening int8 kernel 8 at most.
ALL_ROWS = 2**31 - 1  # csrc/gemv_module.cpp ANY_ROWS
DECODE_ROWS = {"fp32": ALL_ROWS, "bf16": ALL_ROWS, "int8": 8, "int8_lut": 32}
ENV = "POSTTRAIN_GEMV"  # "0": never use these kernels
CSRC = Path(__file__).parent / "csrc"
SOURCES = ("gemv_module.cpp", "gemv_fp32.cpp", "gemv_bf16.cpp", "gemv_int8.cpp", "gemv_int8_lut.cpp")
CFLAGS = ("-O3", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma")
BASE_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512dq", "fma")
NEEDS = {"fp32": BASE_FLAGS, "int8": BASE_FLAGS, "bf16": BASE_FLAGS + ("avx512_bf16",),
         "int8_lut": BASE_FLAGS + ("avx512_bf16", "avx512vbmi")}
CHOICES = {torch.float32: ("fp32",), torch.bfloat16: ("bf16",), torch.int8: ("int8_lut", "int8")}  # best first


@dataclass(frozen=True)
class Packed:
    """W [n, K] in a kernel's layout: [N / tile, K / step, tile, step], N and K padded with zeros
    (each kernel's (tile, step, block): csrc/gemv_module.cpp LAYOUTS)."""

    data: torch.Tensor
    n: int


@dataclass(frozen=True)
class Gemv:
    """One kernel: `w = pack(W)` once (W [N, K] as torch stores it, in the kernel's dtype), then
    `run(x, w, bias)`, or for int8 `run(x, w, scale float32 [N], bias)`; bias None or [N] in x's dtype."""

    kind: str
    call: Callable

    @property
    def decode_rows(self) -> int:
        """The engine's linears call it up to this many rows (DECODE_ROWS)."""
        return DECODE_ROWS[self.kind]

    @property
    def max_rows(self) -> int:
        """The most rows of x a call takes (csrc/gemv_module.cpp LAYOUTS)."""
        return module().max_rows[self.kind]

    def pack(self, weight: torch.Tensor, reuse: Packed | None = None) -> Packed:
        """W packed for this kernel, on huge pages (ARENA); into `reuse` where it has the shape (a
        weight update repacks in place)."""
        shape = packed_shape(weight.shape, *module().layouts[self.kind])
        fits = reuse is not None and reuse.data.shape == shape and reuse.data.dtype == weight.dtype
        out = reuse.data if fits else ARENA.empty(shape, weight.dtype)
        return Packed(pack_into(out, weight, widened=self.kind == "int8_lut"), weight.shape[0])

    def run(self, x: torch.Tensor, w: Packed, *args) -> torch.Tensor:
        return self.call(x, w.data, w.n, *args)


def packed_shape(shape: tuple, tile: int, step: int, block: int) -> torch.Size:
    """[N, K] -> [N' / tile, K' / step, tile, step]: N padded to a multiple of block, K of step."""
    n, k = shape
    return torch.Size((-(-n // block) * block // tile, -(-k // step), tile, step))


def pack_into(out: torch.Tensor, weight: torch.Tensor, widened: bool = False) -> torch.Tensor:
    """Write W [N, K] into `out` (packed_shape): a panel's tile rows go step by step, side by side
    (csrc/outer.h and gemv.h read each panel as one stream); zeros past N and K. widened: int8_lut's
    order within a step (48 outputs x 4 weights, 3 lines of 16 outputs): byte 16L + 8s + 2i + t of
    line v holds output 16v + 4L + i, element 2s + t, so that the bytes of pair s of each output
    widen into vector s (csrc/gemv_int8_lut.cpp)."""
    panels, chunks, tile, step = out.shape
    n, k = weight.shape
    padded = torch.nn.functional.pad(weight.detach(), (0, chunks * step - k, 0, panels * tile - n))
    steps = padded.view(panels, tile, chunks, step).transpose(1, 2)
    if widened:  # [.., line, L, i, s, t] -> [.., line, L, s, i, t]
        steps = steps.reshape(panels, chunks, tile // 16, 4, 4, 2, 2).transpose(4, 5)
    return out.copy_(steps.reshape(out.shape))


class HugeArena:
    """Packed weights on transparent huge pages: freshly mapped 2 MB-aligned chunks (csrc
    huge_bytes), handed out in order, 64-byte aligned. A decode step streams every packed weight,
    and on 4 KB pages each 4 KB of it costs a TLB walk (docs/engine-kernels.md, "Decode GEMVs").
    A chunk is unmapped when no tensor cut from it is left: linears keep theirs for
    life and repack into them."""

    CHUNK = 64 << 20

    def __init__(self):
        self.lock = threading.Lock()
        self.chunk, self.used = None, 0

    def empty(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        nbytes = shape.numel() * dtype.itemsize
        with self.lock:
            if self.chunk is None or self.used + nbytes > len(self.chunk):
                self.chunk, self.used = module().huge_bytes(max(self.CHUNK, nbytes)), 0
            out = self.chunk[self.used : self.used + nbytes]
            self.used += -(-nbytes // 64) * 64
        return out.view(dtype).view(shape)


ARENA = HugeArena()


@functools.cache
def cpu_flags() -> frozenset[str]:
    """This CPU's /proc/cpuinfo flags (tests patch this to play a CPU without some)."""
    return frozenset(cpu_info()["all_flags"].split())


def missing_flags(kind: str) -> list[str]:
    """The CPU flags kernel `kind` (a key of NEEDS) needs that this CPU lacks."""
    have = cpu_flags()
    return [f for f in NEEDS[kind] if f not in have]


def build_dir() -> Path:
    """Under the cache models/gguf.py uses too ($POSTTRAIN_CACHE or ~/.cache/posttrain)."""
    root = Path(os.environ.get("POSTTRAIN_CACHE", Path.home() / ".cache" / "posttrain"))
    return root / "torch_extensions" / f"gemv-torch{torch.__version__}"


def _ninja_on_path() -> None:
    """torch's builder runs `ninja` from PATH; the PyPI package's binary is not there unless the
    venv is activated."""
    try:
        import ninja
    except ImportError:
        return
    os.environ["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"


@contextlib.contextmanager
def _build_lock():
    """One builder at a time, across processes, by a lock the kernel drops when its holder dies.
    torch's own lock is a file that a build killed midway leaves behind, and every later load
    then waits on it for ever; holding ours, nobody else is building, so such a file is stale."""
    with open(build_dir() / "posttrain.flock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        (build_dir() / "lock").unlink(missing_ok=True)
        yield


@functools.cache
def module():
    """The compiled extension, or None (the reason logged once)."""
    if os.environ.get(ENV) == "0":
        log.warning("decode GEMV kernels off (%s=0): the linears keep their GEMM path", ENV)
        return None
    if missing_flags("fp32"):
        log.warning("decode GEMV kernels need %s, missing on this CPU: the linears keep their GEMM path",
                    "/".join(missing_flags("fp32")))
        return None
    from torch.utils import cpp_extension

    _ninja_on_path()
    build_dir().mkdir(parents=True, exist_ok=True)
    if not any(build_dir().glob("*.so")):
        log.warning("building the decode GEMV kernels once, in %s (about 30 s on 2 cores)", build_dir())
    try:
        with _build_lock():
            return cpp_extension.load("posttrain_gemv", [str(CSRC / s) for s in SOURCES],
                                      extra_cflags=list(CFLAGS), extra_include_paths=[str(CSRC)],
                                      build_directory=str(build_dir()))
    except Exception as e:  # noqa: BLE001 - no compiler or ninja: the GEMM path still works
        log.warning("decode GEMV kernels did not build (%s): the linears keep their GEMM path",
                    str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


def kernel_named(kind: str) -> Gemv | None:
    """Kernel `kind` (a key of NEEDS), or None where this CPU lacks its flags or the build failed."""
    if missing_flags(kind) or module() is None:
        return None
    return Gemv(kind, getattr(module(), kind))


def kernel_for(weight_dtype: torch.dtype) -> Gemv | None:
    """The best GEMV this CPU runs for weights of this dtype (float32, bfloat16, or int8 with bf16
    activations), or None (the reason logged once): the linears then keep their GEMM path."""
    kinds = CHOICES.get(weight_dtype, ())
    for kind in kinds:
        if not missing_flags(kind):
            return kernel_named(kind)
    if kinds:
        _say_missing(kinds[-1])
    return None


@functools.cache
def _say_missing(kind: str) -> None:
    log.warning("the %s decode GEMV needs %s, missing on this CPU: %s linears keep their GEMM path",
                kind, "/".join(missing_flags(kind)), kind)
