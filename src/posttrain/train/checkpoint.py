"""Checkpoints of a whole RL run: the HF model directory (safetensors + tokenizer), the
optimizer, RNG states and the pipeline's own state (buffer, sampler, re-queued groups,
versions), written to a temporary directory and renamed into place, so a process killed
mid-save leaves the previous checkpoint intact.

Layout: RUN/checkpoints/step-000004/{model/, trainer.pt, rng.pt, pipeline.json}; RUN/checkpoints/latest.
With trainer ranks, `dcp/` (a Distributed Checkpoint of model and optimizer, sharded) takes
the place of trainer.pt and loads on any rank count. With LoRA adapters, model/ holds the
merged weights (a plain HF model) and adapters.safetensors the adapters; the frozen base lies
once in RUN/checkpoints/lora_base.safetensors (train/lora.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import torch

from posttrain.errors import PosttrainError
from posttrain.models.tiny import save_policy
from posttrain.train.lora import has_lora, load_adapters, save_adapters, serving_state


def _rng_state() -> dict:
    return {"python": random.getstate(), "torch": torch.get_rng_state()}


def save_checkpoint(run_dir: Path, step: int, model, tokenizer, trainer, state: dict,
                    keep: int = 2) -> Path:
    root = Path(run_dir) / "checkpoints"
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_policy(model, tokenizer, tmp / "model", serving_state(model))  # LoRA: merged, plain HF
    if has_lora(model):  # and, to resume, the adapters (and once the base) unmerged
        save_adapters(model, tmp)
    trainer.save_state(tmp)  # trainer.pt, or each rank's shards under dcp/
    torch.save(_rng_state(), tmp / "rng.pt")
    (tmp / "pipeline.json").write_text(json.dumps(state))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    (root / "latest.tmp").write_text(final.name)
    os.replace(root / "latest.tmp", root / "latest")
    for old in sorted(p for p in root.glob("step-*") if p != final)[:-max(keep - 1, 0) or None]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = Path(run_dir) / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if (path / "pipeline.json").is_file() else None


def load_checkpoint(path: Path, model, trainer) -> dict:
    """Load weights, optimizer and RNG states in place; returns the pipeline state."""
    from safetensors.torch import load_file

    lora = has_lora(model)
    if lora and not (path / "adapters.safetensors").is_file():
        raise PosttrainError(f"{path}: the run has LoRA adapters (optim.lora_rank), the checkpoint none")
    weights = load_adapters(path) if lora else load_file(str(path / "model" / "model.safetensors"))
    missing, _ = model.load_state_dict(weights, strict=False)
    if any(not k.endswith("lm_head.weight") for k in missing):  # tied embeddings are not saved
        raise RuntimeError(f"checkpoint {path} misses weights: {missing[:3]}")
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    trainer.load_state(path)
    rng = torch.load(path / "rng.pt", weights_only=False)
    random.setstate(rng["python"])
    torch.set_rng_state(rng["torch"])
    return json.loads((path / "pipeline.json").read_text())
