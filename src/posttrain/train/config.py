"""The trainer's configs: OptimConfig (the optimizer and the transforms chosen once when the
trainer is built) and RLConfig (the policy-gradient step: loss, advantages, KL, TIS, forward),
each name checked against its registry when the config is built."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from posttrain.config_base import StrictModel
from posttrain.train.advantages import ADVANTAGES, DEFAULT_FOR_LOSS
from posttrain.train.kl import KL_ESTIMATORS
from posttrain.train.losses import LOSSES
from posttrain.train.lora import LORA_TARGETS
from posttrain.train.precision import ComputeDtype

_REGISTRIES = {"loss": LOSSES, "kl_estimator": KL_ESTIMATORS, "advantage": ADVANTAGES}


class OptimConfig(StrictModel):
    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = Field(1.0, gt=0)
    micro_batch: int = Field(16, ge=1)
    # One fused AdamW kernel over all parameters (CPU and GPU) instead of a loop over them:
    # faster, rounds differently. Off for SFT here (the quickstart's warm start is
    # calibrated on the loop), on for the RL recipes.
    fused: bool = False
    # Transforms chosen once when the trainer is built (docs/train.md, "Trainer transforms"):
    # bf16 autocast over fp32 master weights ("auto": bf16 where the CPU has AVX-512-BF16/AMX);
    compute_dtype: ComputeDtype = "fp32"
    # logprobs from the final hidden states this many tokens at a time, never the whole
    # [tokens x vocab] logits (train/chunked.py); 0: the full logits;
    logprob_chunk: int = Field(0, ge=0)
    # LoRA adapters (PEFT) of this rank on lora_targets, only they train; 0: every parameter.
    lora_rank: int = Field(0, ge=0)
    lora_alpha: float = Field(16.0, gt=0)
    lora_targets: tuple[str, ...] = LORA_TARGETS
    # each decoder layer's activations recomputed in backward, not kept (train/act_checkpoint.py).
    activation_checkpointing: bool = False
    # AdamW's moments and fp32 masters on this device instead of beside the parameters
    # (train/offload.py), e.g. "cpu" for a model on an accelerator; None: beside them.
    optimizer_offload: str | None = None



class RLConfig(StrictModel):
    loss: str = "grpo"                       # a name in train.losses.LOSSES
    advantage: str | None = None             # None: the loss's usual estimator (DEFAULT_FOR_LOSS)
    domain_norm: bool = False                # whiten advantages within each domain of a batch
    clip_eps: float = Field(0.2, gt=0)
    clip_eps_high: float | None = Field(None, gt=0)  # DAPO clip-higher; None: the loss's default
    # KL to the reference (the policy when the trainer was built; train/reference.py): > 0 turns it
    # on; the estimator is a name in train.kl.KL_ESTIMATORS; "loss" adds kl_coef * KL to the loss
    # (GRPO), "penalty" takes it off each token's advantage (the KL in the reward; train/losses.py).
    kl_coef: float = Field(0.0, ge=0)
    kl_estimator: str = "k3"
    kl_mode: Literal["loss", "penalty"] = "loss"
    temperature: float = Field(1.0, gt=0)
    # Truncated IS against the sampler's logprobs. "none": the PPO ratio is taken against
    # the sampler directly; "token"/"sequence": the ratio is taken against the trainer's own
    # pre-step logprobs and each token is weighted by min(p_trainer / p_sampler, tis_cap).
    tis: Literal["none", "token", "sequence"] = "none"
    tis_cap: float = Field(2.0, gt=0)
    norm_len: int = Field(512, ge=1)         # Dr.GRPO's constant length normaliser
    # The lean packed forward (train/packed.py): shared prompts once, no padding rows; for
    # models it does not cover, share_prefix runs each shared prompt once through the HF modules.
    packed: bool = True
    share_prefix: bool = True
    # Packed forward: the last layer's queries, o_proj and MLP only on rows that make logits.
    trim_last_layer: bool = True
    # Attention in float64, rounded once, in the trainer's logprob forward (kernels/exact_attention.py):
    # with a batch_invariant fp32 engine the sampler's logprobs then equal the trainer's bit for bit
    # (no numerical mismatch left for TIS to correct). Costs trainer time (docs/rl.md).
    exact_logprobs: bool = False
    # MoE models: the experts each token runs through are the engine's (Episode.routing), the gate
    # weights the trainer's own (train/routing_replay.py). Needs an engine that returns routing.
    routing_replay: bool = False

    @field_validator("loss", "kl_estimator", "advantage")
    @classmethod
    def _known_name(cls, v: str | None, info: ValidationInfo) -> str | None:
        """Each name is one its registry holds (None: advantage's default for the loss)."""
        known = _REGISTRIES[info.field_name]
        if v is not None and v not in known:
            raise ValueError(f"unknown {info.field_name} {v!r}; known: {sorted(known)}")
        return v

    @property
    def advantage_name(self) -> str:
        return self.advantage or DEFAULT_FOR_LOSS.get(self.loss, "grpo")
