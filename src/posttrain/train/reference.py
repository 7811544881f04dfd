"""The frozen reference policy of a KL term (RLConfig.kl_coef > 0): what the policy was when the
trainer was built. Under LoRA it is the policy's own base weights with the adapters switched off
(no second copy of the model); otherwise a frozen copy of the policy's weights.

`reference_of(model)` chooses; `with ref.model() as m:` yields the module to score with, and
the trainer runs it through the same forwards (packed, shared-prefix, HF) as the policy, under
no_grad. A copy's weights go once into a run's checkpoints (reference.safetensors), so a resumed
run keeps its reference; the LoRA base is already there (train/lora.py).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from pathlib import Path

from posttrain.train.lora import adapters_off, has_lora


class FrozenCopy:
    """A copy of the policy's weights that never trains."""

    def __init__(self, model):
        self._model = copy.deepcopy(model).eval().requires_grad_(False)

    @contextmanager
    def model(self):
        yield self._model

    def save(self, run_checkpoints: Path) -> None:
        """reference.safetensors beside the run's checkpoints, once (it never changes)."""
        from safetensors.torch import save_model

        path = run_checkpoints / "reference.safetensors"
        if not path.is_file():
            tmp = path.with_suffix(".tmp")
            save_model(self._model, str(tmp))
            tmp.replace(path)

    def load(self, run_checkpoints: Path) -> None:
        from safetensors.torch import load_model

        path = run_checkpoints / "reference.safetensors"
        if path.is_file():
            load_model(self._model, str(path))


class AdapterBase:
    """The LoRA policy's base weights: the same module with its adapters switched off."""

    def __init__(self, model):
        self._model = model

    def model(self):
        return adapters_off(self._model)

    def save(self, run_checkpoints: Path) -> None:
        """Nothing: the base is in checkpoints/lora_base.safetensors."""

    def load(self, run_checkpoints: Path) -> None:
        """Nothing: loading the adapters' checkpoint restores the base."""


def reference_of(model):
    """AdapterBase for a model that carries LoRA adapters, else FrozenCopy."""
    return AdapterBase(model) if has_lora(model) else FrozenCopy(model)
