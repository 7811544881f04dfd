"""The SFT step's loss is the mean over the whole batch's reply tokens, so splitting the batch
into micro-batches (the warm start of a real model runs 2 demonstrations per forward, to bound
its activations' memory) changes its gradient by float rounding only."""

import copy

import torch
from test_prompt_sharing import _groups, _model

from posttrain.train.trainer import OptimConfig, PolicyTrainer


def _gradient(micro_batch: int) -> torch.Tensor:
    trainer = PolicyTrainer(_model(), 0, OptimConfig(lr=1e-2, micro_batch=micro_batch, grad_clip=1e9))
    trainer.sft_step(copy.deepcopy(_groups(3, 3, True)))     # replies of 1 to 10 tokens
    return torch.cat([p.grad.reshape(-1) for p in trainer.model.parameters() if p.grad is not None])


def test_micro_batches_give_the_whole_batch_token_mean():
    whole, split = _gradient(32), _gradient(2)
    assert whole.abs().max() > 1e-3
    torch.testing.assert_close(split, whole, rtol=1e-4, atol=1e-7)
