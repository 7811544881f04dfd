"""RoPE scaling as a transform: set an HF config's rope parameters and rebuild the model's rotary
module, so a checkpoint trained at `original_max` tokens runs at `factor` times that.

Two kinds, both HF's own rope types (transformers' modeling_rope_utils computes the frequencies):
- "linear" (position interpolation, PI): every frequency divided by `factor`;
- "yarn": high frequencies kept, low ones divided by `factor`, a ramp between (by wavelength
  against `original_max`), and cos/sin scaled by 0.1 ln(factor) + 1.
"none" puts the plain rope back. Both are static tables (a fixed cos/sin per position), so the
engine's cached table (engine/paged/glue.py STATIC_ROPE) and the trainer's packed forward use
them as they are. Apply the transform before an engine is built over the model.
"""

from __future__ import annotations

from typing import Literal

RopeKind = Literal["none", "linear", "yarn"]
KINDS: tuple[str, ...] = ("none", "linear", "yarn")
# HF rope types with a fixed cos/sin per position. Not: dynamic NTK (its table grows with the
# length), longrope (short or long factors by the sequence length, modeling_rope_utils.py).
STATIC_ROPE = ("default", "linear", "llama3", "yarn")


def rope_parameters(config, kind: RopeKind, factor: float, original_max: int) -> dict:
    """The `rope_parameters` dict HF reads for `kind` (the config's rope_theta kept)."""
    if kind not in KINDS:
        raise ValueError(f"unknown rope scaling {kind!r}; choose from {list(KINDS)}")
    if factor < 1 or original_max < 1:
        raise ValueError(f"rope scaling needs factor >= 1 and original_max >= 1, got {factor}, {original_max}")
    theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta") or \
        getattr(config, "rope_theta", None) or 10000.0
    if kind == "none":
        return {"rope_type": "default", "rope_theta": theta}
    params = {"rope_type": kind, "rope_theta": theta, "factor": float(factor)}
    if kind == "yarn":
        params["original_max_position_embeddings"] = int(original_max)
    return params


def with_rope_scaling(model_or_config, kind: RopeKind, factor: float = 1.0, original_max: int = 2048):
    """Set rope scaling on an HF config (or a model's config, in place) and return it; for a
    model its rotary module is rebuilt from the new config. max_position_embeddings becomes
    original_max * factor ("none": original_max)."""
    is_config = not hasattr(model_or_config, "config")
    config = model_or_config if is_config else model_or_config.config
    config.rope_parameters = rope_parameters(config, kind, factor, original_max)
    config.max_position_embeddings = int(original_max * (factor if kind != "none" else 1))
    if not is_config:
        _rebuild_rotary(model_or_config)
    return model_or_config


def rope_kind(config) -> str:
    """"none", "linear", "yarn" or HF's other rope type name, read from the config."""
    rope_type = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    return "none" if rope_type == "default" else rope_type


def _rebuild_rotary(model) -> None:
    """A fresh rotary module of the model's own class from its (new) config, on its device."""
    old = model.model.rotary_emb
    model.model.rotary_emb = type(old)(config=model.config).to(old.inv_freq.device)
