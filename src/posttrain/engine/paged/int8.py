"""Weight-only int8 linears for bf16 decode on CPU (`EngineConfig(weights="int8")`, opt-in, lossy).

Each output channel's weights are rounded to int8 with a symmetric scale (its max |w| / 127).
Calls of decode's rows (where a step streams every weight from memory) run the int8 kernel of
kernels/gemv.py where the CPU has it (up to `gemv.DECODE_ROWS`: 32 with VBMI, else 8), half the
bytes of bf16 read at the streaming rate; without it, calls of at most INT8_ROWS rows run ATen's
int8 weight GEMM (`_weight_int8pack_mm`). Calls of more rows run the usual packed bf16 GEMM on the
dequantized weights (int8 x scale), so every row sees the same quantized model, though not with
the same rounding in the int8 kernel as in the GEMM. The int8 copy follows its source parameters
like any packed copy (kernels/packed.py): RL weight updates requantize it.
"""

from __future__ import annotations

import torch

from posttrain.kernels.gemv import kernel_for, kernel_named
from posttrain.kernels.packed import OneDnnLinear
from posttrain.kernels.plan import INT8_ROWS  # up to this many rows ATen's int8 GEMM beats the bf16 one


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric int8: weight [N, K] -> (int8 [N, K], float32 scales [N])."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127
    return torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8), scale


class Int8Linear(OneDnnLinear):
    """The int8-weights variant: our int8 kernel `kind` (default: the best this CPU runs) for its
    rows where `gemv`, else ATen's int8 GEMM up to INT8_ROWS rows; more rows through the oneDNN bf16
    GEMM on the dequantized weights."""

    def __init__(self, *linears: torch.nn.Linear, gemv: bool = False, kind: str | None = None):
        super().__init__(*linears)
        self.int8 = None  # (int8 weights [N, K], scales [N] in the compute dtype)
        self.use_gemv, self.kind = gemv or kind is not None, kind
        self.gemv_weights = None  # the int8 kernel's packed copy

    def _transform(self, weight: torch.Tensor) -> torch.Tensor:
        q, scale = quantize(weight)
        self.int8 = (q, scale.to(weight.dtype))
        return (q.float() * scale[:, None]).to(weight.dtype)  # dequantized, for the packed GEMM

    def _prepare(self) -> None:
        super()._prepare()
        self.gemv, self.gemv_rows = self._gemv_call() if self.use_gemv else (None, 0)

    def _gemv_call(self) -> tuple:
        """(x -> scale * (x q^T) + b through the int8 GEMV (kernels/gemv.py), the most rows it
        takes), or (None, 0) without it."""
        kernel = kernel_named(self.kind) if self.kind else kernel_for(torch.int8)
        if kernel is None:
            return None, 0
        q = self.gemv_weights = kernel.pack(self.int8[0], self.gemv_weights)
        scale = self.int8[1].float()  # the compute dtype's scales, exactly
        bias = None if self.bias is None else self.bias.detach().contiguous()
        return (lambda x: kernel.run(x, q, scale, bias)), kernel.decode_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if 0 < x.shape[0] <= self.gemv_rows:  # gemv_rows is 0 without a kernel
            return self.gemv(x.contiguous())
        if x.shape[0] > INT8_ROWS:
            return super().forward(x)  # the packed GEMM on the dequantized weights
        y = torch.ops.aten._weight_int8pack_mm(x.contiguous(), *self.int8)
        return y if self.bias is None else y + self.bias.detach()


def check_weights(weights: str, dtype: torch.dtype, device: torch.device) -> None:
    """Raise unless EngineConfig.weights can run here: int8 is for bf16 compute on CPU (with fp32
    activations the int8 kernel is slower than fp32 GEMM)."""
    if weights != "compute" and (device.type != "cpu" or dtype != torch.bfloat16
                                 or not torch.backends.mkldnn.is_available()):
        raise ValueError(f"weights='int8' needs bfloat16 compute on a CPU (this engine computes in {dtype} on "
                         f"{device.type}): give dtype='bfloat16', or 'auto' on a CPU with AVX-512-BF16 or AMX")
