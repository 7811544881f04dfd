"""LocalEngine: the default in-process engine, i.e. the paged engine with default knobs.

It generates from an HF model object that a trainer may share; `update_weights` copies new
weights in place (and flushes the prefix cache). See engine/paged/engine.py for how it works.
"""

from __future__ import annotations

from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.engine import PagedEngine
from posttrain.engine.paged.sequence import validate_prompts

__all__ = ["LocalEngine", "EngineConfig", "validate_prompts"]


class LocalEngine(PagedEngine):
    """`LocalEngine(model, tokenizer=None, device=None)` (None: the model's device); optional
    `config=EngineConfig(...)`."""
