"""Sliding-window attention layers of an HF config: which layers attend to a window, and how wide.

HF's rule, followed by the engine and the trainer alike: a layer typed "sliding_attention" in
`config.layer_types` (Qwen2, Qwen3 with use_sliding_window) attends, at query position q, to the
keys k with q - window < k <= q, window = `config.sliding_window`; Mistral, which has no
layer_types, does so in every layer when sliding_window is set. None: the layer sees everything.
"""

from __future__ import annotations


def layer_windows(config) -> list[int | None]:
    """Per layer: its window in tokens, or None for full causal attention."""
    n, window = config.num_hidden_layers, getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not window:
        return [None] * n
    if types is not None:
        return [window if t == "sliding_attention" else None for t in types]
    return [window] * n if config.model_type == "mistral" else [None] * n


def has_windows(config) -> bool:
    return any(w is not None for w in layer_windows(config))
