"""KL to a reference (train/kl.py, train/reference.py, algo.kl_coef): the k1/k2/k3 estimators by
hand, the loss and penalty modes, config checks, and a trainer whose KL is 0 at step 0 and grows
as the policy moves, with a frozen copy and with the base under LoRA adapters."""

import math

import pytest
import torch

from posttrain.errors import ConfigError, PosttrainError
from posttrain.recipes.rl.config import load_rl_config
from posttrain.train.batch import collate
from posttrain.train.kl import KL_ESTIMATORS, k1_kl, k2_kl, k3_kl
from posttrain.train.logprobs import token_logprobs
from posttrain.train.losses import grpo_loss
from posttrain.train.reference import AdapterBase, FrozenCopy
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model

LP = torch.tensor([[-1.0, -2.0]])
REF = torch.tensor([[-1.5, -2.0]])  # d = ref - lp = [-0.5, 0]


def test_registry_names_the_three_estimators():
    assert set(KL_ESTIMATORS) == {"k1", "k2", "k3"}


def test_k1_is_the_log_ratio():
    assert k1_kl(LP, REF).tolist() == [[0.5, 0.0]]


def test_k2_is_half_the_squared_log_ratio():
    assert k2_kl(LP, REF)[0].tolist() == pytest.approx([0.125, 0.0])


def test_k3_is_nonnegative_and_zero_at_the_reference():
    assert k3_kl(LP, REF)[0].tolist() == pytest.approx([math.exp(-0.5) + 0.5 - 1, 0.0])
    d = torch.linspace(-3, 3, 13)
    assert (k3_kl(torch.zeros(13), d) >= 0).all()


def test_kl_loss_mode_differentiates_the_estimator():
    lp = LP.clone().requires_grad_()
    loss, _ = grpo_loss(lp, lp.detach(), torch.tensor([0.0]), torch.ones(1, 2), ref_logprobs=REF,
                        kl_coef=0.1, kl_estimator="k2")
    loss.backward()
    assert loss.item() == pytest.approx(0.1 * 0.125 / 2)
    assert lp.grad[0].tolist() == pytest.approx([0.1 * 0.5 / 2, 0.0])  # d k2 / d lp = lp - ref


def test_kl_penalty_mode_shapes_each_tokens_advantage_without_its_gradient():
    lp = LP.clone().requires_grad_()
    loss, _ = grpo_loss(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 2), ref_logprobs=REF,
                        kl_coef=0.1, kl_estimator="k1", kl_mode="penalty")
    loss.backward()
    # ratio 1: per token -(A - 0.1 k1_t), mean over the 2 tokens; gradient -(A - 0.1 k1_t) / 2
    assert loss.item() == pytest.approx(-(0.95 + 1.0) / 2)
    assert lp.grad[0].tolist() == pytest.approx([-0.95 / 2, -0.5])


@pytest.mark.parametrize("override, message", [
    ('algo.kl_estimator="k4"', "unknown kl_estimator 'k4'"),
    ('algo.kl_mode="reward"', "config key algo.kl_mode"),
    ("algo.kl_coef=-1", "greater than or equal to 0"),
])
def test_bad_kl_knobs_are_refused_when_built(override, message):
    with pytest.raises(ConfigError, match=message):
        load_rl_config(None, [override])


def test_kl_needs_a_reference():
    with pytest.raises(PosttrainError, match="needs a reference"):
        PolicyTrainer(_model(), 0, OptimConfig()).rl_step(_groups(1, 2, False), RLConfig(kl_coef=0.1))


@pytest.mark.parametrize("lora_rank, kind", [(0, FrozenCopy), (4, AdapterBase)])
@pytest.mark.parametrize("packed", [True, False])
def test_kl_to_the_reference_is_zero_at_step_zero_and_grows(lora_rank, kind, packed):
    torch.manual_seed(0)  # LoRA's A
    trainer = PolicyTrainer(_model(), 0, OptimConfig(lr=3e-2, lora_rank=lora_rank, lora_alpha=8),
                            reference=True)
    assert isinstance(trainer.reference, kind)
    episodes = _groups(2, 4, False)
    cfg = RLConfig(kl_coef=0.01, packed=packed, share_prefix=False, tis="token")
    kl = [trainer.rl_step(episodes, cfg)["kl_ref"] for _ in range(4)]
    assert kl[0] == 0.0
    assert 0 < kl[1] < kl[3] and kl[2] > 0
    assert all(p.requires_grad for p in trainer.params)  # adapters train again after the reference's pass
    b = collate(episodes, 0)
    with torch.no_grad(), trainer.reference.model() as ref:  # the reference is the model at build time
        assert torch.allclose(token_logprobs(ref, b.input_ids, b.attention_mask),
                              token_logprobs(_model(), b.input_ids, b.attention_mask), atol=1e-6)


def test_a_resumed_trainer_keeps_the_runs_reference(tmp_path):
    trainer = PolicyTrainer(_model(), 0, OptimConfig(lr=3e-2), reference=True)
    episodes = _groups(2, 4, False)
    for _ in range(2):
        trainer.rl_step(episodes, RLConfig(kl_coef=0.01))
    (tmp_path / "step_2").mkdir()
    trainer.save_state(tmp_path / "step_2")
    resumed = PolicyTrainer(trainer.model, 0, OptimConfig(lr=3e-2), reference=True)  # the moved policy
    resumed.load_state(tmp_path / "step_2")
    with trainer.reference.model() as ref, resumed.reference.model() as again:
        for a, b in zip(ref.parameters(), again.parameters()):
            assert torch.equal(a, b)


@pytest.mark.parametrize("overrides, message", [
    (["algo.kl_coef=0.1", "cluster.trainer_ranks=2"], "run on one trainer process"),
    (["algo.exact_logprobs=true", "optim.activation_checkpointing=true"], "activation_checkpointing = false"),
])
def test_the_run_config_refuses_what_the_trainer_cannot_do(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_rl_config(None, overrides)
