"""Activation checkpointing (train/act_checkpoint.py, optim.activation_checkpointing): the same
loss and gradients as the plain model in every forward, fewer tensors kept for backward, and a
transform that applies once, copies with the model and comes off."""

import copy

import pytest
import torch

from posttrain.train.act_checkpoint import checkpoint_layers, is_checkpointed, uncheckpoint_layers
from posttrain.train.batch import collate
from posttrain.train.chunked import ChunkedHead
from posttrain.train.logprobs import token_logprobs
from posttrain.train.packed import packed_logprobs
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import FORWARDS, _groups, _model

PATHS = FORWARDS | {"hf": lambda m, eps, t: _hf(m, eps, t),
                    "hf-chunked": lambda m, eps, t: _hf(m, eps, t, ChunkedHead(7)),
                    "packed-chunked": lambda m, eps, t: packed_logprobs(m, eps, t, head=ChunkedHead(7))}


def _hf(model, episodes, temperature, head=None):
    b = collate(episodes, 0)
    return token_logprobs(model, b.input_ids, b.attention_mask, temperature, head)


def _loss_grads_saved(model, forward, episodes):
    """(loss, gradients, bytes autograd saved for backward outside checkpointed regions)."""
    mask = collate(episodes, 0).loss_mask
    saved = [0]

    def pack(t):
        saved[0] += t.numel() * t.element_size()
        return t

    model.zero_grad()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = -(forward(model, episodes, 0.7) * mask).sum()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()], saved[0]


@pytest.mark.parametrize("forward", PATHS)
def test_checkpointed_layers_give_the_plain_loss_and_gradients(forward):
    episodes = _groups(2, 3, True)
    model = _model(num_hidden_layers=3)
    loss, grads, saved = _loss_grads_saved(model, PATHS[forward], episodes)
    checkpoint_layers(model)
    c_loss, c_grads, c_saved = _loss_grads_saved(model, PATHS[forward], episodes)
    assert torch.allclose(loss, c_loss, rtol=1e-6)
    for g, c in zip(grads, c_grads):
        assert torch.allclose(g, c, atol=1e-6, rtol=1e-5)
    if forward == "hf-shared-prefix":  # layers that write a KV cache run plainly
        assert c_saved == saved
    else:
        assert c_saved < 0.3 * saved


def test_the_transform_is_idempotent_copies_and_comes_off():
    model = checkpoint_layers(checkpoint_layers(_model()))
    assert all(is_checkpointed(layer) for layer in model.model.layers)
    twin = copy.deepcopy(model)
    assert all(layer.forward.__self__ is layer for layer in twin.model.layers)
    with torch.no_grad():  # no grad: nothing to recompute, the plain forward
        ids = torch.tensor([[1, 2, 3]])
        assert torch.equal(model(ids).logits, _model()(ids).logits)
    uncheckpoint_layers(uncheckpoint_layers(model))
    assert not any(is_checkpointed(layer) or "forward" in vars(layer) for layer in model.model.layers)


@pytest.mark.parametrize("lora_rank", [0, 4])
@pytest.mark.parametrize("packed", [True, False])
def test_a_trainer_step_with_checkpointing_equals_the_plain_step(packed, lora_rank):
    episodes = _groups(2, 4, False)
    cfg = RLConfig(packed=packed, share_prefix=False, tis="token")
    weights = []
    for on in (False, True):
        torch.manual_seed(0)  # the same LoRA initialisation in both
        optim = OptimConfig(lr=1e-2, activation_checkpointing=on, logprob_chunk=8, lora_rank=lora_rank)
        trainer = PolicyTrainer(_model(), 0, optim)
        assert trainer.setup["activation_checkpointing"] is on
        trainer.rl_step(episodes, cfg)
        weights.append([p.detach().clone() for p in trainer.model.parameters()])
    for a, b in zip(*weights):
        assert torch.allclose(a, b, atol=1e-6)
