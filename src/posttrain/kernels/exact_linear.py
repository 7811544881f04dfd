"""The engine's packed fp32 linear (kernels/packed.py), differentiable: the trainer's side of
batch-invariant linears.

MKL's packed sgemm, on calls padded as the engine pads them (kernels/packed.py: at least PACK_HINT
rows, a multiple of `row_quantum()`: 1 on Intel's AVX-512 code, 4 on MKL's AVX2 code), gives a row
the same bits whatever the row count and thread count; plain F.linear does not once torch runs
more than one thread on Intel (SmolLM2's down_proj at 2 threads: some row counts differ from
the packed bits; docs/engine-kernels.md, "Batch-invariant logprobs"), nor below 16 rows. The
forward packs the weight (one reorder, as the engine does when its weights change) and runs the
engine's kernel; the backward is the ordinary matmul pair, whose rounding reaches no logprob.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from posttrain.kernels.packed import PACK_HINT, pad_rows, padded_rows, row_quantum


class _PackedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, PACK_HINT)
        return torch.ops.mkl._mkl_linear(x, packed, weight, bias, x.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad @ weight if ctx.needs_input_grad[0] else None
        grad_w = grad.t() @ x if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def can_run(weight: torch.Tensor) -> bool:
    return weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.backends.mkl.is_available()


def exact_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x W^T + b with the engine's packed bits; x [..., in] -> [..., out]. The rows run
    padded with zero rows to at least PACK_HINT (a single row may take another kernel) and to a
    multiple of row_quantum (MKL's AVX2 code rounds a call's last 1-3 rows apart). Where MKL is
    missing (or not CPU fp32) it is F.linear, and the bits may differ from the engine's."""
    if not can_run(weight):
        return F.linear(x, weight, bias)
    lead, n = x.shape[:-1], x.shape[:-1].numel()
    rows = pad_rows(x.reshape(n, x.shape[-1]), padded_rows(max(n, PACK_HINT), row_quantum()))
    return _PackedLinear.apply(rows, weight, bias)[:n].view(*lead, weight.shape[0])


@contextlib.contextmanager
def exact_linears_on(model):
    """Every nn.Linear of an HF model through exact_linear for the duration of a block."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    for m in linears:
        m.forward = lambda x, m=m: exact_linear(x, m.weight, m.bias)
    try:
        yield model
    finally:
        for m in linears:
            del m.forward
