"""KV memory planning: bytes per token and totals for a model config, before running it."""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.engine.paged.kv_cache import DTYPE_BYTES, kv_bytes_per_token
from posttrain.errors import PosttrainError


def read_model_config(spec: str) -> dict:
    """A config dict from a checkpoint dir, a config.json path, or a tiny preset name."""
    from posttrain.models.tiny import PRESETS

    if spec in PRESETS:
        return dict(PRESETS[spec], model_type="llama", vocab_size=1024, max_position_embeddings=2048)
    path = Path(spec)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise PosttrainError(f"no model config at {spec} (give a checkpoint dir, a config.json or a preset)")
    try:
        cfg = json.loads(path.read_text())
    except ValueError as e:
        raise PosttrainError(f"{path} is not valid JSON: {e}") from e
    cfg = cfg.get("text_config", cfg)
    missing = [k for k in ("num_hidden_layers", "num_attention_heads", "hidden_size") if k not in cfg]
    if missing:
        raise PosttrainError(f"{path} lacks {', '.join(missing)}")
    return cfg


def plan_kv(cfg: dict, context: int, batch: int = 1, kv_dtype: str = "float32", block_size: int = 16) -> dict:
    """KV bytes per token and in total for `batch` sequences of `context` tokens (block-rounded)."""
    if kv_dtype not in DTYPE_BYTES:
        raise PosttrainError(f"kv dtype must be one of {sorted(DTYPE_BYTES)}")
    if context < 1 or batch < 1:
        raise PosttrainError("context and batch must be >= 1")
    layers = cfg["num_hidden_layers"]
    kv_heads = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    per_token = kv_bytes_per_token(layers, kv_heads, head_dim, kv_dtype)
    slots = -(-context // block_size) * block_size * batch
    return {
        "layers": layers,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "kv_dtype": kv_dtype,
        "bytes_per_token": per_token,
        "context": context,
        "batch": batch,
        "block_size": block_size,
        "blocks": slots // block_size,
        "total_bytes": per_token * slots,
        "max_position_embeddings": cfg.get("max_position_embeddings"),
    }


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"
