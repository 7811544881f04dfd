"""Optimizer state offloaded: AdamW's moments and an fp32 master copy of each trained parameter
live on another device (host memory, pinned when the parameters are on an accelerator), not
beside the parameters. Each step copies the gradients over, steps there, and copies the
updated values back. On an accelerator this frees the two fp32 moments (8 bytes per trained
parameter) for activations at long sequence lengths, and the update is computed on the fp32
master whatever the parameters' dtype, at the cost of two transfers per step (ZeRO-Offload's
trade, Ren et al. 2021). With the parameters already on the host it is the same arithmetic
as a plain AdamW (tested bit-equal), one copy more."""

from __future__ import annotations

import torch


class OffloadedAdamW:
    """`OffloadedAdamW(params, device="cpu", **adamw_kwargs)`: the optimizer interface the trainer
    uses (step, zero_grad, param_groups, state_dict, load_state_dict)."""

    def __init__(self, params, device: str | torch.device = "cpu", **adamw_kwargs):
        self.params = list(params)
        self.device = torch.device(device)
        pin = self.device.type == "cpu" and any(p.device.type != "cpu" for p in self.params)
        self.masters = [self._master(p, pin) for p in self.params]
        self.inner = torch.optim.AdamW(self.masters, **adamw_kwargs)

    def _master(self, p: torch.Tensor, pin: bool) -> torch.Tensor:
        m = p.detach().to(self.device, torch.float32, copy=True)
        return (m.pin_memory() if pin else m).requires_grad_(True)

    @property
    def param_groups(self) -> list[dict]:
        return self.inner.param_groups

    @property
    def state(self):
        return self.inner.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()
        self.inner.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        for p, m in zip(self.params, self.masters):   # blocking copies: no stream to wait on
            m.grad = None if p.grad is None else p.grad.to(self.device, torch.float32)
        self.inner.step()
        for p, m in zip(self.params, self.masters):
            p.copy_(m)

    def state_dict(self) -> dict:
        return {"adamw": self.inner.state_dict(), "masters": [m.detach().clone() for m in self.masters]}

    def load_state_dict(self, state: dict) -> None:
        """Restore the moments and the masters, and the parameters from the masters."""
        with torch.no_grad():
            for p, m, saved in zip(self.params, self.masters, state["masters"]):
                m.copy_(saved)
                p.copy_(m)
        self.inner.load_state_dict(state["adamw"])

    def state_bytes(self) -> dict[str, int]:
        """Bytes the optimizer holds on its own device: masters and moments."""
        moments = sum(t.numel() * t.element_size() for s in self.inner.state.values()
                      for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
        masters = sum(m.numel() * m.element_size() for m in self.masters)
        return {"masters": masters, "moments": moments}
