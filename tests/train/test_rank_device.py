"""FSDP2 ranks and devices: a rank picks NCCL with its shard on a GPU where it sees CUDA, else gloo
on the CPU; one gloo rank (a process group of one, no Ray) trains as one process does."""

import copy

import pytest
import torch.distributed as dist

from posttrain.train.fsdp import ShardedTrainer
from posttrain.train.ranks import _on_host, rank_backend
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model


def test_a_rank_picks_nccl_on_a_gpu_and_gloo_on_a_cpu():
    assert rank_backend(True) == ("nccl", "cuda")
    assert rank_backend(False) == ("gloo", "cpu")


def test_the_ranks_are_sent_a_policy_on_the_cpu_as_it_is():
    model = _model()
    assert _on_host(model) is model


@pytest.fixture
def gloo_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_one_gloo_rank_on_the_cpu_trains_as_one_process(gloo_group):
    model, optim, algo = _model(), OptimConfig(lr=1e-2, micro_batch=4), RLConfig(tis="token", packed=False)
    one = PolicyTrainer(copy.deepcopy(model), 0, optim)
    rank = ShardedTrainer(copy.deepcopy(model), 0, optim, device="cpu")
    assert rank.device.type == "cpu"
    for seed in range(3):
        episodes = _groups(2, 4, False, seed=seed)
        a, b = one.rl_step(episodes, algo), rank.rl_step(episodes, algo)
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)
