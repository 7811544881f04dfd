"""Activation checkpointing per decoder layer, as a transform of a plain HF model
(OptimConfig.activation_checkpointing): each layer keeps only its input for backward and runs
its forward again there (torch.utils.checkpoint, non-reentrant), so a step holds one layer's
activations at a time instead of every layer's. The model code has no branch for it.

`checkpoint_layers` sets each layer's `forward` (an instance attribute over the class's) and
`uncheckpoint_layers` removes it; both are idempotent. The packed forward (train/packed.py)
calls its own layer function on the layers' weights through `run_layer`, which checkpoints
exactly the layers the transform marked. A layer called with a KV cache (the shared-prefix
forward, train/prefix.py) runs plainly: its recompute would write the cache twice.
"""

from __future__ import annotations

import types

import torch
from torch.utils.checkpoint import checkpoint

from posttrain.errors import PosttrainError


def _layers(model):
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise PosttrainError(f"activation checkpointing needs a decoder with model.layers; "
                             f"{type(model).__name__} has none")
    return layers


def _checkpointed_forward(layer, *args, **kwargs):
    plain = type(layer).forward
    if not torch.is_grad_enabled() or kwargs.get("cache") is not None \
            or kwargs.get("past_key_values") is not None:
        return plain(layer, *args, **kwargs)
    return checkpoint(plain, layer, *args, use_reentrant=False, **kwargs)


def is_checkpointed(layer) -> bool:
    forward = vars(layer).get("forward")
    return getattr(forward, "__func__", None) is _checkpointed_forward


def checkpoint_layers(model):
    """Checkpoint every decoder layer of `model` in place; returns the model. A bound method,
    so copy.deepcopy(model) gives a copy whose layers checkpoint themselves."""
    for layer in _layers(model):
        if not is_checkpointed(layer):
            layer.forward = types.MethodType(_checkpointed_forward, layer)
    return model


def uncheckpoint_layers(model):
    """Undo `checkpoint_layers`: the layers' class forward again; returns the model."""
    for layer in _layers(model):
        if is_checkpointed(layer):
            del layer.forward
    return model


def run_layer(fn, layer, *args):
    """fn(layer, *args), recomputed in backward when `layer` is checkpointed and grad is on."""
    if is_checkpointed(layer) and torch.is_grad_enabled():
        return checkpoint(fn, layer, *args, use_reentrant=False)
    return fn(layer, *args)
