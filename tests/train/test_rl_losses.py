"""Dr.GRPO, DAPO, RLOO, PPO-clip, truncated IS, advantage estimators and mismatch
metrics against hand-computed cases."""

import math

import pytest
import torch

from posttrain.train.advantages import ADVANTAGES, get_advantage
from posttrain.train.losses import LOSS_WEIGHTING, LOSSES, get_loss, tis_weights
from posttrain.train.mismatch import mismatch_stats

MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
ADV = torch.tensor([2.0, -1.0])


def _on_policy(name, **kw):
    lp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    loss, stats = get_loss(name)(lp, lp.detach().clone(), ADV, MASK, **kw)
    loss.backward()
    return loss.item(), lp.grad.flatten().tolist(), stats


def test_registry_has_every_loss_and_weighting():
    assert set(LOSSES) == {"grpo", "dr_grpo", "dapo", "rloo", "ppo_clip"}
    assert LOSS_WEIGHTING["dapo"] == LOSS_WEIGHTING["ppo_clip"] == "token"
    assert set(ADVANTAGES) == {"grpo", "dr_grpo", "rloo", "batch"}


def test_dr_grpo_sums_tokens_over_a_constant():
    loss, grad, _ = _on_policy("dr_grpo", norm_len=4)
    # seq sums: -2*2 = -4 and +1; mean over 2 sequences = -1.5; / 4
    assert loss == pytest.approx(-1.5 / 4)
    # every token of seq0 gets -A/(B*L) = -2/8, seq1 +1/8
    assert grad == pytest.approx([-0.25, -0.25, 0.0, 0.125, 0.0, 0.0])


def test_dapo_token_mean_and_clip_higher():
    loss, grad, _ = _on_policy("dapo")
    # token-level: (-2 -2 +1) / 3 tokens
    assert loss == pytest.approx(-1.0)
    assert grad == pytest.approx([-2 / 3, -2 / 3, 0.0, 1 / 3, 0.0, 0.0])
    old = torch.zeros(1, 1)
    for r, expect_clipped in ((1.25, False), (1.3, True)):  # eps_high = 0.28
        lp = torch.full((1, 1), math.log(r))
        loss, stats = get_loss("dapo")(lp, old, torch.tensor([1.0]), torch.ones(1, 1))
        assert loss.item() == pytest.approx(-min(r, 1.28))
        assert stats["clip_frac"] == float(expect_clipped)
    lp = torch.full((1, 1), math.log(0.7))  # low side keeps eps = 0.2, A < 0: max(0.7, 0.8)
    loss, _ = get_loss("dapo")(lp, old, torch.tensor([-1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(0.8)


def test_rloo_is_sequence_reinforce_without_clipping():
    loss, grad, _ = _on_policy("rloo")
    assert loss == pytest.approx((-4.0 + 1.0) / 2)
    assert grad == pytest.approx([-1.0, -1.0, 0.0, 0.5, 0.0, 0.0])
    lp = torch.full((1, 1), math.log(3.0))  # ratio 3 is not clipped
    loss, _ = get_loss("rloo")(lp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(-3.0)


def test_ppo_clip_is_symmetric_token_mean():
    loss, _, _ = _on_policy("ppo_clip")
    assert loss == pytest.approx(-1.0)
    lp = torch.full((1, 1), math.log(1.3))
    loss, stats = get_loss("ppo_clip")(lp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(-1.2) and stats["clip_frac"] == 1.0


def test_tis_token_and_sequence_weights():
    old = torch.tensor([[0.0, 0.0]])
    ro = torch.tensor([[math.log(0.5), math.log(4.0)]])  # ratios 2 and 0.25
    mask = torch.ones(1, 2)
    w, trunc = tis_weights(old, ro, mask, cap=1.5, level="token")
    assert w.flatten().tolist() == pytest.approx([1.5, 0.25]) and trunc.flatten().tolist() == [1, 0]
    w, _ = tis_weights(old, ro, mask, cap=1.5, level="sequence")
    assert w.flatten().tolist() == pytest.approx([math.sqrt(0.5)] * 2)  # geometric mean


def test_tis_weights_scale_the_grpo_gradient():
    lp = torch.zeros(1, 2, requires_grad=True)
    ro = torch.tensor([[math.log(0.5), 0.0]])  # token 0: p_train/p_sampler = 2, capped at 1.5
    loss, stats = get_loss("grpo")(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 2),
                                   rollout_logprobs=ro, tis_cap=1.5, tis_level="token")
    loss.backward()
    assert loss.item() == pytest.approx(-(1.5 + 1.0) / 2)
    assert lp.grad.flatten().tolist() == pytest.approx([-0.75, -0.5])
    assert stats["tis_truncated_frac"] == 0.5 and stats["tis_weight_mean"] == pytest.approx(1.25)


def test_advantage_estimators_hand_cases():
    r = torch.tensor([1.0, 0.0, 0.0, 3.0, 3.0])
    g = torch.tensor([0, 0, 0, 1, 1])
    rloo = get_advantage("rloo")(r, g)
    assert rloo.tolist() == pytest.approx([1.0, -0.5, -0.5, 0.0, 0.0])
    assert get_advantage("dr_grpo")(r, g).tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0, 0])
    b = get_advantage("batch")(torch.tensor([1.0, 3.0]), torch.tensor([0, 1]))
    assert b.tolist() == pytest.approx([-1.0, 1.0], abs=1e-5)
    with pytest.raises(KeyError, match="unknown advantage"):
        get_advantage("nope")


def test_mismatch_stats_hand_case():
    lp = torch.tensor([[0.0, math.log(2.0)]])
    ro = torch.zeros(1, 2)
    s = mismatch_stats(lp, ro, torch.ones(1, 2))
    d = math.log(2.0)  # k3 with rho = 2: rho - log rho - 1 on one token, 0 on the other
    assert s["mismatch_k3"] == pytest.approx((2 - d - 1) / 2)
    assert s["mismatch_max_abs"] == pytest.approx(d)
    assert s["is_weight_mean"] == pytest.approx(1.5)
    assert s["ess"] == pytest.approx(9 / (2 * 5))  # (1+2)^2 / (2 * (1+4))
    same = mismatch_stats(ro, ro, torch.ones(1, 2))
    assert same["mismatch_k3"] == 0 and same["ess"] == pytest.approx(1.0)
