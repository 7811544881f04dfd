"""The linear variant on our own kernels (kernels/gemv.py): calls of up to the kernel's rows stream
its packed copy of W; the rest go to a GEMM variant (kernels/packed.py) over the same weights."""

from __future__ import annotations

import torch

from posttrain.kernels.gemv import kernel_for, kernel_named
from posttrain.kernels.sourced import SourcedLinear


class GemvLinear(SourcedLinear):
    """Our kernel `kind` (default: the best this CPU runs for W's dtype) for calls of up to its
    DECODE_ROWS rows (fp32 and bf16: every call, so prefill and decode round a row alike), on its
    own packed copy of W, repacked in place on a weight update. Other calls, and every call where
    this CPU lacks the kernel or its build failed (logged), go to `rest(*linears)`, a GEMM variant
    that packs its own copy at its first call."""

    def __init__(self, *linears: torch.nn.Linear, rest, kind: str | None = None):
        super().__init__(*linears)
        self.rest = rest(*linears)
        self.kind = kind
        self.gemv_weights = None  # the kernel's packed copy

    def invalidate(self) -> None:
        super().invalidate()
        self.rest.invalidate()

    def _prepare(self) -> None:
        w = self.weight.detach()
        kernel = None if w.device.type != "cpu" else kernel_named(self.kind) if self.kind else kernel_for(w.dtype)
        if kernel is None:
            self.gemv, self.gemv_rows = None, 0
            return
        bias = None if self.bias is None else self.bias.detach().contiguous()
        packed = self.gemv_weights = kernel.pack(w, self.gemv_weights)
        self.gemv, self.gemv_rows = (lambda x: kernel.run(x, packed, bias)), kernel.decode_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 0:  # a step that needs no logits: no GEMM copy packed for it
            return x.new_empty(0, len(self.weight))
        if x.shape[0] <= self.gemv_rows:  # gemv_rows is 0 without a kernel
            return self.gemv(x.contiguous())
        return self.rest(x)
