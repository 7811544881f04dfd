"""Optimizer offload (train/offload.py, optim.optimizer_offload): the same AdamW arithmetic with
the moments and fp32 masters on their own device, its state through a checkpoint, and a clear
refusal where it cannot run."""

import copy

import pytest
import torch

from posttrain.errors import PosttrainError
from posttrain.train.offload import OffloadedAdamW
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model


def _trainer(offload):
    return PolicyTrainer(_model(), 0, OptimConfig(lr=1e-2, optimizer_offload=offload, weight_decay=0.01))


def _params(trainer):
    return torch.cat([p.detach().reshape(-1) for p in trainer.model.parameters()])


def _steps(trainer, n):
    """SFT, RL, SFT, ... steps on the same small batch."""
    for i in range(n):
        episodes = copy.deepcopy(_groups(2, 4, True))
        if i % 2:
            trainer.rl_step(episodes, RLConfig())
        else:
            trainer.sft_step(episodes)


def test_offloaded_steps_equal_plain_adamw_bit_for_bit():
    plain, off = _trainer(None), _trainer("cpu")
    assert torch.equal(_params(plain), _params(off))
    _steps(plain, 3)
    _steps(off, 3)
    moved = (_params(off) - _params(_trainer(None))).abs().max()
    assert moved > 0 and torch.equal(_params(plain), _params(off))
    assert isinstance(off.optimizer, OffloadedAdamW) and off.setup["optimizer_offload"] == "cpu"
    n = sum(p.numel() for p in off.params)
    assert off.optimizer.state_bytes() == {"masters": 4 * n, "moments": 8 * n}


def test_offloaded_state_resumes_exactly(tmp_path):
    whole = _trainer("cpu")
    _steps(whole, 3)
    first = _trainer("cpu")
    _steps(first, 2)
    first.save_state(tmp_path)
    second = PolicyTrainer(copy.deepcopy(first.model), 0, first.optim_cfg)
    second.load_state(tmp_path)
    second.sft_step(copy.deepcopy(_groups(2, 4, True)))   # the third step, as _steps runs it
    assert torch.equal(_params(second), _params(whole))


def test_set_lr_reaches_the_offloaded_groups():
    t = _trainer("cpu")
    t.set_lr(3e-4)
    assert t.optimizer.param_groups[0]["lr"] == 3e-4


def test_trainer_ranks_refuse_offload():
    from posttrain.train.fsdp import ShardedTrainer

    with pytest.raises(PosttrainError, match="optimizer_offload"):
        ShardedTrainer(_model(), 0, OptimConfig(optimizer_offload="cpu"))


def test_the_run_config_takes_it_and_refuses_it_with_ranks():
    from posttrain.errors import ConfigError
    from posttrain.recipes.rl.config import load_rl_config

    assert load_rl_config(None, ['optim.optimizer_offload="cpu"']).optim.optimizer_offload == "cpu"
    with pytest.raises(ConfigError, match="optimizer_offload"):
        load_rl_config(None, ['optim.optimizer_offload="cpu"', "cluster.trainer_ranks=2"])
