"""The base of the engine's linear classes: y = x W^T + b over one nn.Linear, or several side by
side (q/k/v, gate/up: outputs concatenated in order), on a copy that follows its source parameters.

Each variant (kernels/packed.py's GEMMs, kernels/gemv_linear.py, engine/paged/int8.py) prepares
its own copy of W in `_prepare` and runs it in `forward`; `__call__` rebuilds the copy first when a
source parameter was modified in place (its version counter moved) or `invalidate` was called.
"""

from __future__ import annotations

import torch


class SourcedLinear:
    """One linear variant over `linears`; `weight` and `bias` are the (concatenated) parameters."""

    gemv = None  # x -> y through our kernel (kernels/gemv.py), for calls of up to gemv_rows rows
    gemv_rows = 0

    def __init__(self, *linears: torch.nn.Linear):
        self.sources = linears
        self.key = None
        self.weight = linears[0].weight if len(linears) == 1 else None  # the concatenation, when fused
        self.bias = linears[0].bias if len(linears) == 1 else None

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
        self._prepare()
        self.key = self._key()

    def _transform(self, weight: torch.Tensor) -> torch.Tensor:
        """The weights the kernel multiplies by (engine/paged/int8.py rounds them)."""
        return weight

    def _prepare(self) -> None:
        """Build this variant's copy of self.weight (packed for its kernel)."""

    def _bias(self) -> torch.Tensor | None:
        return None if self.bias is None else self.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.key != self._key():
            self._refresh()
        return self.forward(x)
