"""FSDP2 trainer ranks: the policy sharded with `fully_shard` over torch.distributed (gloo on
CPU, NCCL on GPU), one RL step split across ranks, and sharded checkpoints (DCP).

Each rank trains on a contiguous share of the batch's episodes; advantages are computed over
the whole batch first, and each micro-batch is weighted by its share of the whole batch, so
the summed gradient is the one process's gradient. FSDP2's reduce-scatter would divide by
the world size: the divide factor is set to 1 and the reduction forced to a plain sum (gloo
has no pre-multiplied sum; this also settles the gloo sum-versus-average question). Stats
are summed across ranks; mismatch stats are computed over the gathered logprobs of every rank. A checkpoint written by N ranks loads on M,
M = 1 included (a plain model, no process group): train/dcp.py.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from posttrain.errors import PosttrainError
from posttrain.train.advantages import episode_advantages
from posttrain.train.batch import by_segment
from posttrain.train.mismatch import mismatch_stats
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Episode

ADDITIVE = ("step_time_s", "forward_s", "backward_s")  # timings, not shares of the batch: rank 0's own


def check_shards(model, world: int) -> None:
    """Every parameter splits evenly over `world` ranks along its first dimension (FSDP2's
    shard dimension), so a checkpoint's shards are exact slices on any rank count that divides."""
    for name, p in model.named_parameters():
        if p.shape[0] % world:
            raise PosttrainError(f"{world} trainer ranks do not divide the model's shards: {name} has "
                                 f"{p.shape[0]} rows; use a rank count that divides every first dimension")


def shard(model, world: int):
    """fully_shard each decoder layer, then the root (embeddings, norm, tied head)."""
    from torch.distributed.fsdp import fully_shard

    check_shards(model, world)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    for module in model.modules():
        if hasattr(module, "set_force_sum_reduction_for_comms"):
            module.set_gradient_divide_factor(1.0)  # the ranks' shares already sum to the batch
            module.set_force_sum_reduction_for_comms(True)  # gloo has no PREMUL_SUM
    return model


def share(n: int, rank: int, world: int) -> slice:
    """The contiguous slice of n items that rank `rank` of `world` trains on."""
    lo, hi = n * rank // world, n * (rank + 1) // world
    return slice(lo, hi)


class ShardedTrainer(PolicyTrainer):
    """PolicyTrainer over an FSDP2 model in a process group; every rank calls rl_step with the
    whole batch and gets the whole batch's stats."""

    def __init__(self, model, pad_id: int, optim: OptimConfig, device: str = "cpu"):
        """device: the rank's own ("cpu" with gloo, its GPU with NCCL: ranks.rank_backend)."""
        if optim.optimizer_offload:   # its sharded checkpoints name the model's parameters
            raise PosttrainError("optim.optimizer_offload is not available with trainer ranks (FSDP2): "
                                 "FSDP2's own CPUOffloadPolicy is the way there; leave it unset")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        model = model.to(device)  # before sharding: the shards live where the rank computes
        super().__init__(shard(model, self.world), pad_id, optim.model_copy(update={"fused": False}))

    def rl_step(self, episodes: list[Episode], cfg: RLConfig) -> dict:
        if len(episodes) < self.world:
            raise PosttrainError(f"a batch of {len(episodes)} episodes cannot feed {self.world} ranks")
        cfg = cfg.model_copy(update={"packed": False})  # the packed forward reads weights directly
        episodes, advantages = by_segment(episodes, episode_advantages(episodes, cfg.advantage_name,
                                                                       cfg.domain_norm))
        mine = share(len(episodes), self.rank, self.world)
        totals = (len(episodes), sum(e.tokens_out for e in episodes))
        stats, lp, ro = self.rl_part(episodes[mine], advantages[mine], cfg, totals)
        keys = sorted(k for k in stats if k not in ADDITIVE + ("grad_norm", "tokens"))
        summed = torch.tensor([stats[k] for k in keys], dtype=torch.float64, device=self.device)  # NCCL: on the GPU
        dist.all_reduce(summed)
        stats |= dict(zip(keys, summed.tolist()))
        parts: list = [None] * self.world
        dist.all_gather_object(parts, (lp, ro))
        lp, ro = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        return stats | mismatch_stats(lp, ro, torch.ones_like(lp))

    def full_state(self) -> dict:
        """The whole model's weights on every rank (a collective), on CPU: what engines load."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True,
                                                                         cpu_offload=True))
