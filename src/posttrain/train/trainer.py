"""Optimizer steps for SFT and RL over episodes: micro-batches with gradient
accumulation, grad-norm clipping, AdamW. Sampling happens elsewhere."""

from __future__ import annotations

import time

import torch
from pydantic import BaseModel, ConfigDict, Field

from posttrain.train.advantages import episode_advantages
from posttrain.train.batch import Batch, collate
from posttrain.train.logprobs import token_logprobs
from posttrain.train.losses import get_loss, k3_kl, masked_mean, sft_loss
from posttrain.types import Episode


class OptimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = Field(1.0, gt=0)
    micro_batch: int = Field(16, ge=1)


class RLConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    loss: str = "grpo"
    clip_eps: float = Field(0.2, gt=0)
    kl_coef: float = Field(0.0, ge=0)
    temperature: float = Field(1.0, gt=0)


def _micro_batches(episodes: list[Episode], size: int):
    for i in range(0, len(episodes), size):
        yield episodes[i:i + size]


class PolicyTrainer:
    """Holds the model being trained, its optimizer and an optional frozen reference."""

    def __init__(self, model, pad_id: int, optim: OptimConfig, ref_model=None):
        self.model, self.pad_id, self.optim_cfg, self.ref_model = model, pad_id, optim, ref_model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=optim.lr, betas=optim.betas,
                                           weight_decay=optim.weight_decay)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _step(self, loss_fn, episodes: list[Episode], advantages: list[float] | None) -> dict:
        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        stats: dict[str, float] = {}
        total_tokens = sum(e.tokens_out for e in episodes)
        for chunk_idx, chunk in enumerate(_micro_batches(list(range(len(episodes))),
                                                         self.optim_cfg.micro_batch)):
            eps = [episodes[i] for i in chunk]
            adv = [advantages[i] for i in chunk] if advantages is not None else None
            batch = collate(eps, self.pad_id, adv)
            loss, part = loss_fn(batch)
            (loss * len(eps) / len(episodes)).backward()
            for k, v in part.items():
                stats[k] = stats.get(k, 0.0) + v * len(eps) / len(episodes)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim_cfg.grad_clip)
        self.optimizer.step()
        self.model.eval()
        stats |= {"grad_norm": float(grad_norm), "tokens": float(total_tokens),
                  "step_time_s": time.perf_counter() - t0}
        return stats

    def sft_step(self, episodes: list[Episode]) -> dict:
        """One step of next-token loss on the masked (reply) tokens of demonstrations."""
        def loss_fn(b: Batch):
            lp = token_logprobs(self.model, b.input_ids, b.attention_mask)
            loss = sft_loss(lp, b.loss_mask)
            return loss, {"loss": loss.item()}
        return self._step(loss_fn, episodes, None)

    def rl_step(self, episodes: list[Episode], cfg: RLConfig) -> dict:
        """One policy-gradient step on sampled episodes with group-normalised advantages."""
        policy_loss = get_loss(cfg.loss)

        def loss_fn(b: Batch):
            lp = token_logprobs(self.model, b.input_ids, b.attention_mask, cfg.temperature)
            ref = None
            if self.ref_model is not None and cfg.kl_coef > 0:
                with torch.no_grad():
                    ref = token_logprobs(self.ref_model, b.input_ids, b.attention_mask,
                                         cfg.temperature)
            loss, part = policy_loss(lp, b.old_logprobs, b.advantages, b.loss_mask,
                                     clip_eps=cfg.clip_eps, ref_logprobs=ref, kl_coef=cfg.kl_coef)
            with torch.no_grad():
                part["entropy"] = -masked_mean(lp, b.loss_mask).item()
                part["mismatch_k3"] = masked_mean(k3_kl(lp, b.old_logprobs), b.loss_mask).item()
                part["mismatch_max_abs"] = ((lp - b.old_logprobs).abs() * b.loss_mask).max().item()
                if ref is not None:
                    part["kl_ref"] = masked_mean(k3_kl(lp, ref), b.loss_mask).item()
            return loss, {"loss": loss.item(), **part}
        return self._step(loss_fn, episodes, episode_advantages(episodes))
