"""LoRA adapters (PEFT) on a causal LM, applied in place when the trainer is built
(OptimConfig.lora_rank > 0): each target projection W x becomes W x + (alpha / r) B A x with
W frozen, A [r, in] random and B [out, r] zero, so the first forward is the base model's.
Only A and B train.

Engines and served checkpoints never see adapters: `serving_state` gives the merged weights
W + (alpha / r) B A under the plain model's names, which the rollout engine loads on every
weight update (rollout/weights.py) and checkpoints write as an ordinary HF directory.
For resume, a checkpoint also holds its adapters (adapters.safetensors), and the run's frozen
base is written once beside its checkpoints (checkpoints/lora_base.safetensors).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import torch

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def apply_lora(model, rank: int, alpha: float, targets: tuple[str, ...] = LORA_TARGETS):
    """Inject adapters into `model` in place (peft.inject_adapter_in_model) and freeze every
    other parameter; returns the model. A model that carries adapters already (an SFT
    trainer's, then an RL trainer's) keeps them and trains them on."""
    if has_lora(model):
        return model
    from peft import LoraConfig, inject_adapter_in_model

    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0)
    return inject_adapter_in_model(config, model)


def _lora_layers(model) -> dict:
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # no peft: nothing can carry adapters
        return {}
    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}


def serving_state(model) -> dict[str, torch.Tensor] | None:
    """The merged weights under the plain model's names (every tensor of its state dict), or
    None when the model carries no adapters (then its own state dict is the served one)."""
    layers = _lora_layers(model)
    if not layers:
        return None
    state = {}
    with torch.no_grad():
        for name, value in model.state_dict().items():
            if ".lora_" not in name:
                state[name.replace(".base_layer.", ".")] = value
        for name, layer in layers.items():
            base = layer.base_layer.weight
            state[f"{name}.weight"] = base + layer.get_delta_weight("default").to(base.dtype)
    return state


def base_linear(module):
    """The nn.Linear under a LoRA wrapper, or the module itself."""
    return getattr(module, "base_layer", module)


def adapter_output(module, x: torch.Tensor) -> torch.Tensor | None:
    """The adapter's term (alpha / r) B A x of a LoRA-wrapped linear (no dropout: lora_dropout
    is 0 here), or None for a plain one or one whose adapters are off (`adapters_off`): what
    peft's forward adds to the base layer's output."""
    if not hasattr(module, "lora_A") or module.disable_adapters:
        return None
    return module.lora_B["default"](module.lora_A["default"](x)) * module.scaling["default"]


def has_lora(model) -> bool:
    return bool(_lora_layers(model))


@contextmanager
def adapters_off(model):
    """The base model within: every adapter switched off (peft's enable_adapters), then on again,
    trainable (peft sets their requires_grad back)."""
    layers = _lora_layers(model).values()
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield model
    finally:
        for layer in layers:
            layer.enable_adapters(True)


def _unique(state: dict) -> dict:
    """One name per storage (a tied lm_head is embed_tokens), contiguous, for safetensors."""
    seen, out = set(), {}
    for name, value in state.items():
        if value.data_ptr() not in seen:
            seen.add(value.data_ptr())
            out[name] = value.detach().contiguous()
    return out


def save_adapters(model, step_dir: Path) -> None:
    """adapters.safetensors into a checkpoint being written; the frozen base (every other
    tensor, under the wrapped names) once per run, as checkpoints/lora_base.safetensors."""
    from safetensors.torch import save_file

    state = model.state_dict()
    adapters = {k: v for k, v in state.items() if ".lora_" in k}
    save_file(_unique(adapters), str(step_dir / "adapters.safetensors"))
    base = step_dir.parent / "lora_base.safetensors"
    if not base.is_file():  # the base never trains: the first checkpoint's is every one's
        tmp = base.with_suffix(".tmp")
        save_file(_unique({k: v for k, v in state.items() if ".lora_" not in k}), str(tmp))
        os.replace(tmp, base)


def load_adapters(step_dir: Path) -> dict[str, torch.Tensor]:
    """The unmerged weights of a checkpoint (its adapters and the run's base), wrapped names."""
    from safetensors.torch import load_file

    return load_file(str(step_dir.parent / "lora_base.safetensors")) | \
        load_file(str(step_dir / "adapters.safetensors"))
