"""Optimizer steps for SFT and RL over episodes: micro-batches with gradient
accumulation, grad-norm clipping, AdamW. Sampling happens elsewhere."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import torch

from posttrain.devices import module_device
from posttrain.models.moe import moe_blocks
from posttrain.errors import PosttrainError
from posttrain.train.act_checkpoint import checkpoint_layers
from posttrain.train.advantages import episode_advantages
from posttrain.train.batch import Batch, by_segment, collate
from posttrain.train.config import OptimConfig, RLConfig
from posttrain.train.logprobs import exact_token_logprobs, token_logprobs
from posttrain.train.kl import KL_ESTIMATORS
from posttrain.train.losses import LOSS_WEIGHTING, get_loss, masked_mean, sft_loss
from posttrain.train.chunked import ChunkedHead
from posttrain.train.lora import apply_lora
from posttrain.train.mismatch import mismatch_stats
from posttrain.train.precision import compute_context, resolve_dtype
from posttrain.train.packed import packed_logprobs
from posttrain.train.prefix import shared_prefix_logprobs
from posttrain.train.reference import reference_of
from posttrain.train.routing_replay import check_replay, routed
from posttrain.types import Episode


def _optimizer(params: list, optim: OptimConfig):
    kwargs = dict(lr=optim.lr, betas=optim.betas, weight_decay=optim.weight_decay)
    if optim.optimizer_offload:
        from posttrain.train.offload import OffloadedAdamW

        return OffloadedAdamW(params, optim.optimizer_offload, **kwargs, fused=optim.fused or None)
    return torch.optim.AdamW(params, **kwargs, fused=optim.fused or None)


def _micro_batches(episodes: list[Episode], size: int):
    for i in range(0, len(episodes), size):
        yield episodes[i:i + size]


class PolicyTrainer:
    """Holds the model being trained, its optimizer and, with `reference`, the frozen reference
    of a KL term (RLConfig.kl_coef): the policy as it is now (train/reference.py). `device`
    (resolved once by the caller, devices.py) moves the model there first; None leaves it where
    it is. Every batch follows the model's device."""

    def __init__(self, model, pad_id: int, optim: OptimConfig, reference: bool = False,
                 device: torch.device | str | None = None):
        if device is not None:
            model = model.to(device)
        self.device = module_device(model)
        if optim.lora_rank:
            model = apply_lora(model, optim.lora_rank, optim.lora_alpha, optim.lora_targets)
        self.reference = reference_of(model) if reference else None  # before checkpointing: a plain copy
        if optim.activation_checkpointing:
            checkpoint_layers(model)
        self.model, self.pad_id, self.optim_cfg = model, pad_id, optim
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.compute_dtype = resolve_dtype(optim.compute_dtype, device=self.device.type)
        self._compute = compute_context(self.compute_dtype, self.device.type)
        self.head = ChunkedHead(optim.logprob_chunk) if optim.logprob_chunk else None
        self.moe = bool(moe_blocks(model))  # its forwards record (and may replay) the routing
        # What the run records of the transforms (summary.json "trainer").
        self.setup = {"compute_dtype": self.compute_dtype, "logprob_chunk": optim.logprob_chunk,
                      "lora_rank": optim.lora_rank, "trainable_params": sum(p.numel() for p in self.params),
                      "activation_checkpointing": optim.activation_checkpointing}
        self.optimizer = _optimizer(self.params, optim)
        self.setup["optimizer_offload"] = optim.optimizer_offload

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])

    def save_state(self, checkpoint: Path) -> None:
        """The optimizer's state into a checkpoint directory (trainer.pt); a reference's weights
        once per run, beside the checkpoints."""
        torch.save(self.state_dict(), checkpoint / "trainer.pt")
        if self.reference is not None:
            self.reference.save(checkpoint.parent)

    def load_state(self, checkpoint: Path) -> None:
        """From trainer.pt, or from the shards N trainer ranks wrote (dcp/: loads on one, train/dcp.py)."""
        if (checkpoint / "dcp").is_dir():
            from posttrain.train.dcp import load_sharded

            load_sharded(self.model, self.optimizer, checkpoint / "dcp")
        else:
            self.load_state_dict(torch.load(checkpoint / "trainer.pt", weights_only=False))
        if self.reference is not None:
            self.reference.load(checkpoint.parent)

    def close(self) -> None:
        """Nothing to stop: this trainer runs in the calling process."""

    def _step(self, loss_fn, episodes: list[Episode], advantages: list[float] | None,
              weighting: str = "seq", dropout: bool = True, totals: tuple[int, int] | None = None,
              around=None) -> dict:
        """Accumulate gradients over micro-batches, each weighted by its share of the
        batch's sequences (weighting "seq") or model tokens ("token"), then one step.
        dropout=False keeps the model in eval mode (RL: the distribution that sampled).
        totals: (sequences, tokens) of the whole batch when `episodes` is one rank's part.
        around(batch): a context over each micro-batch's forward and backward that yields a dict
        of metrics it fills on exit (the MoE router's, train/routing_replay.py)."""
        t0 = time.perf_counter()
        if dropout:
            self.model.train()
        elif self.model.training:
            self.model.eval()
        self.optimizer.zero_grad(set_to_none=True)
        stats: dict[str, float] = {}
        forward_s = backward_s = 0.0  # the loss's forward (log-probabilities) and its backward
        n_seqs, total_tokens = totals or (len(episodes), sum(e.tokens_out for e in episodes))
        for chunk in _micro_batches(list(range(len(episodes))), self.optim_cfg.micro_batch):
            eps = [episodes[i] for i in chunk]
            adv = [advantages[i] for i in chunk] if advantages is not None else None
            batch = collate(eps, self.pad_id, adv).to(self.device)
            t_forward = time.perf_counter()
            with around(batch) if around else contextlib.nullcontext({}) as extra:
                with self._compute():
                    loss, part = loss_fn(batch, eps)
                share = (sum(e.tokens_out for e in eps) / max(1, total_tokens) if weighting == "token"
                         else len(eps) / n_seqs)
                t_backward = time.perf_counter()
                (loss * share).backward()
            forward_s += t_backward - t_forward
            backward_s += time.perf_counter() - t_backward
            part |= extra
            for k, v in part.items():
                stats[k] = stats.get(k, 0.0) + v * share
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.optim_cfg.grad_clip, foreach=True)
        if hasattr(grad_norm, "full_tensor"):  # sharded parameters: the norm over every shard
            grad_norm = grad_norm.full_tensor()
        self.optimizer.step()
        if dropout:
            self.model.eval()
        stats |= {"grad_norm": float(grad_norm), "tokens": float(total_tokens),
                  "step_time_s": time.perf_counter() - t0, "forward_s": forward_s, "backward_s": backward_s}
        return stats

    def sft_step(self, episodes: list[Episode]) -> dict:
        """One step of next-token loss on the masked (reply) tokens of demonstrations: their
        mean over the whole batch's tokens, whatever the micro-batch size."""
        def loss_fn(b: Batch, _episodes):
            lp = token_logprobs(self.model, b.input_ids, b.attention_mask, head=self.head)
            loss = sft_loss(lp, b.loss_mask)
            return loss, {"loss": loss.item()}
        return self._step(loss_fn, episodes, None, weighting="token")

    def _logprobs(self, model, b: Batch, episodes: list[Episode], cfg: RLConfig) -> torch.Tensor:
        lp = None
        head = None if cfg.exact_logprobs else self.head  # exact: the engine's bits, full logits
        if self.moe:  # one padded forward: its rows line up with the batch's routing [B, T]
            return (exact_token_logprobs(model, b.input_ids, b.attention_mask, cfg.temperature)
                    if cfg.exact_logprobs else token_logprobs(model, b.input_ids, b.attention_mask,
                                                              cfg.temperature, head))
        if cfg.packed:
            lp = packed_logprobs(model, episodes, cfg.temperature, cfg.trim_last_layer, cfg.exact_logprobs,
                                 head)
        if lp is None and cfg.exact_logprobs:  # the HF forward, whose exact bits are tested
            return exact_token_logprobs(model, b.input_ids, b.attention_mask, cfg.temperature)
        if lp is None and cfg.share_prefix:
            lp = shared_prefix_logprobs(model, episodes, self.pad_id, cfg.temperature, head)
        return lp if lp is not None else token_logprobs(model, b.input_ids, b.attention_mask,
                                                        cfg.temperature, head)

    def _reference_logprobs(self, b: Batch, episodes: list[Episode], cfg: RLConfig) -> torch.Tensor:
        """The reference's logprobs of the batch, [B, T], through the policy's own forwards. First,
        before the policy's forward: LoRA's reference is the policy module, adapters off."""
        with torch.no_grad(), self.reference.model() as ref, self._routed(ref, b, cfg):
            return self._logprobs(ref, b, episodes, cfg)

    def _routed(self, model, b: Batch, cfg: RLConfig):
        """The MoE blocks' forward over this batch, the engine's experts pinned with routing_replay;
        its router metrics go to the step's (a dense model: no blocks, no metrics)."""
        return routed(model, b.routing, b.attention_mask, pin=cfg.routing_replay)

    def rl_step(self, episodes: list[Episode], cfg: RLConfig) -> dict:
        """One policy-gradient step on sampled episodes with the configured advantages,
        loss and (optionally) truncated IS; logs trainer–sampler mismatch over the batch."""
        advantages = episode_advantages(episodes, cfg.advantage_name, cfg.domain_norm)
        stats, lp, ro = self.rl_part(*by_segment(episodes, advantages), cfg)
        return stats | mismatch_stats(lp, ro, torch.ones_like(lp))

    def rl_part(self, episodes: list[Episode], advantages: list[float], cfg: RLConfig,
                totals: tuple[int, int] | None = None) -> tuple[dict, torch.Tensor, torch.Tensor]:
        """The step on this part of a batch (all of it, or one rank's share under `totals`);
        returns its stats and the trainer's and sampler's logprobs of its sampled tokens."""
        policy_loss = get_loss(cfg.loss)
        if cfg.routing_replay:
            check_replay(self.model, episodes)
        if cfg.kl_coef > 0 and self.reference is None:
            raise PosttrainError("algo.kl_coef > 0 needs a reference: build the trainer with reference=True")
        flat_lp, flat_ro = [], []

        def loss_fn(b: Batch, eps: list[Episode]):
            ref = self._reference_logprobs(b, eps, cfg) if cfg.kl_coef > 0 else None
            lp = self._logprobs(self.model, b, eps, cfg)
            # With TIS, the ratio is against this step's own (pre-update) logprobs and the
            # sampler enters only through the truncated weight (decoupled PPO).
            old = lp.detach() if cfg.tis != "none" else b.old_logprobs
            extra = {"clip_eps_high": cfg.clip_eps_high} if cfg.clip_eps_high else {}
            loss, part = policy_loss(lp, old, b.advantages, b.loss_mask, clip_eps=cfg.clip_eps,
                                     ref_logprobs=ref, kl_coef=cfg.kl_coef, kl_estimator=cfg.kl_estimator,
                                     kl_mode=cfg.kl_mode, norm_len=cfg.norm_len,
                                     rollout_logprobs=b.old_logprobs, tis_level=cfg.tis,
                                     tis_cap=cfg.tis_cap if cfg.tis != "none" else None, **extra)
            with torch.no_grad():
                part["entropy"] = -masked_mean(lp, b.loss_mask).item()
                keep = b.loss_mask.bool()
                flat_lp.append(lp.detach()[keep])
                flat_ro.append(b.old_logprobs[keep])
                if ref is not None:
                    part["kl_ref"] = masked_mean(KL_ESTIMATORS[cfg.kl_estimator](lp, ref), b.loss_mask).item()
            return loss, {"loss": loss.item(), **part}
        # No dropout: the trainer's logprobs are those of the distribution the engine sampled
        # (as TRL's disable_dropout); the packed forward has none either way.
        stats = self._step(loss_fn, episodes, advantages, LOSS_WEIGHTING[cfg.loss], dropout=False,
                           totals=totals, around=lambda b: self._routed(self.model, b, cfg))
        return stats, torch.cat(flat_lp), torch.cat(flat_ro)
