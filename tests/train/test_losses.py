"""GRPO loss and group advantages against hand-computed cases."""

import math

import pytest
import torch

from posttrain.train.advantages import group_normalized
from posttrain.train.kl import k3_kl
from posttrain.train.losses import get_loss, grpo_loss, sft_loss


def test_group_normalized_hand_case():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    g = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = group_normalized(r, g, eps=0.0)
    # group 0: mean 0.25, population std sqrt(0.1875) = 0.4330
    assert adv[0].item() == pytest.approx(0.75 / math.sqrt(0.1875))
    assert adv[1].item() == pytest.approx(-0.25 / math.sqrt(0.1875))
    assert adv[4:].tolist() == [0.0, 0.0]  # all-equal group: no signal
    assert group_normalized(r, g, scale_by_std=False)[0].item() == pytest.approx(0.75)


def test_grpo_on_policy_is_minus_mean_advantage_and_gradient_is_a_logp():
    lp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    old = lp.detach().clone()
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, stats = grpo_loss(lp, old, adv, mask)
    # ratio 1: per-seq loss = -A; mean over 2 sequences = -(2 - 1)/2
    assert loss.item() == pytest.approx(-0.5)
    loss.backward()
    # d/dlp of -A*ratio/n_tokens/B: seq0 tokens -2/2/2, seq1 token +1/1/2
    assert lp.grad.flatten().tolist() == pytest.approx([-0.5, -0.5, 0.0, 0.5, 0.0, 0.0])
    assert stats["clip_frac"] == 0.0


def test_grpo_clips_ratio_for_positive_advantage():
    old = torch.zeros(1, 1)
    lp = torch.full((1, 1), math.log(1.5), requires_grad=True)
    loss, stats = grpo_loss(lp, old, torch.tensor([1.0]), torch.ones(1, 1), clip_eps=0.2)
    assert loss.item() == pytest.approx(-1.2)  # min(1.5*1, 1.2*1)
    loss.backward()
    assert lp.grad.item() == 0.0 and stats["clip_frac"] == 1.0
    # negative advantage: min(1.5*-1, 1.2*-1) = -1.5, not clipped
    loss, _ = grpo_loss(lp.detach(), old, torch.tensor([-1.0]), torch.ones(1, 1), clip_eps=0.2)
    assert loss.item() == pytest.approx(1.5)


def test_kl_penalty_and_k3():
    assert k3_kl(torch.tensor([-1.0]), torch.tensor([-1.0])).item() == 0.0
    d = 0.5  # ref - lp
    assert k3_kl(torch.tensor([0.0]), torch.tensor([d])).item() == pytest.approx(math.exp(d) - d - 1)
    lp = torch.zeros(1, 2)
    loss, _ = grpo_loss(lp, lp, torch.tensor([0.0]), torch.ones(1, 2),
                        ref_logprobs=torch.full((1, 2), d), kl_coef=0.1)
    assert loss.item() == pytest.approx(0.1 * (math.exp(d) - d - 1))


def test_empty_sequences_do_not_dilute_and_registry():
    lp = torch.zeros(2, 2)
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    loss, _ = grpo_loss(lp, lp, torch.tensor([1.0, 5.0]), mask)
    assert loss.item() == pytest.approx(-1.0)
    assert get_loss("grpo") is grpo_loss
    with pytest.raises(KeyError, match="unknown loss"):
        get_loss("nope")
    assert sft_loss(torch.tensor([[-2.0, -4.0]]), torch.tensor([[1.0, 0.0]])).item() == 2.0
