"""The trainer on an explicit device: device="cpu" runs the same code as the default (the model
where it is) and gives the same numbers; the batch and every index tensor follow the model."""

import copy

import pytest
import torch

from posttrain.train.batch import collate
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model


def _steps(trainer: PolicyTrainer, cfg: RLConfig) -> tuple[list[dict], dict]:
    episodes = _groups(3, 4, True)
    stats = [trainer.sft_step(episodes[:5]), trainer.rl_step(episodes, cfg)]
    return [{k: v for k, v in s.items() if not k.endswith("_s")} for s in stats], trainer.model.state_dict()


@pytest.mark.parametrize("rl", [RLConfig(), RLConfig(packed=False), RLConfig(packed=False, share_prefix=False),
                                RLConfig(kl_coef=0.1, tis="token")])
@pytest.mark.parametrize("optim", [OptimConfig(micro_batch=5), OptimConfig(micro_batch=5, logprob_chunk=16)])
def test_an_explicit_cpu_device_trains_as_the_default(rl, optim):
    model = _model()
    default = PolicyTrainer(copy.deepcopy(model), 0, optim, reference=rl.kl_coef > 0)
    explicit = PolicyTrainer(copy.deepcopy(model), 0, optim, reference=rl.kl_coef > 0, device="cpu")
    assert default.device == explicit.device == torch.device("cpu")
    want, want_weights = _steps(default, rl)
    got, got_weights = _steps(explicit, rl)
    assert got == want
    assert all(torch.equal(got_weights[k], want_weights[k]) for k in want_weights)


def test_the_trainer_moves_the_model_to_its_device_and_the_reference_follows():
    trainer = PolicyTrainer(_model(), 0, OptimConfig(), reference=True, device="cpu")
    assert trainer.device == next(trainer.model.parameters()).device
    with trainer.reference.model() as ref:
        assert next(ref.parameters()).device == trainer.device


def test_a_batch_on_its_device_is_the_same_object():
    batch = collate(_groups(1, 2, False), 0, [1.0, -1.0])
    assert batch.to(torch.device("cpu")) is batch
