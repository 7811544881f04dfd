"""No separate old-policy pass: each batch feeds one update, so an RL step runs one forward
per micro-batch, and the PPO ratio's old logprobs are the engine's (tis "none") or this
forward's own, detached (TIS): the ratio is 1 at the step and its gradient the policy gradient."""

import copy

import pytest
import torch
from torch.overrides import TorchFunctionMode

from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model


class EmbeddingCalls(TorchFunctionMode):
    """Counts embedding lookups: one per forward of the HF modules or of the packed forward."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.n += func is torch.nn.functional.embedding
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("packed, share_prefix", [(True, True), (False, True), (False, False)])
@pytest.mark.parametrize("tis", ["none", "token"])
def test_an_rl_step_runs_one_forward_per_micro_batch(packed, share_prefix, tis):
    episodes = _groups(3, 4, False)  # 12 episodes, micro-batches of 5: 3 micro-batches
    trainer = PolicyTrainer(_model(), 0, OptimConfig(micro_batch=5))
    counter = EmbeddingCalls()
    with counter:
        stats = trainer.rl_step(episodes, RLConfig(packed=packed, share_prefix=share_prefix, tis=tis))
    per_forward = 2 if share_prefix and not packed else 1  # prefix.py: the prompts, then the tails
    assert counter.n == 3 * per_forward
    if tis == "token":  # the ratio is against this forward's own logprobs
        assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-6)


def test_the_detached_old_logprobs_give_the_on_policy_gradient():
    """TIS on with sampler logprobs equal to the trainer's: the step is the one whose old
    logprobs came from a separate pass (tis "none" with the engine's logprobs = the trainer's)."""
    from posttrain.train.batch import collate
    from posttrain.train.logprobs import token_logprobs

    model = _model()
    episodes = _groups(2, 4, False)
    b = collate(episodes, 0)
    with torch.no_grad():
        lp = token_logprobs(model, b.input_ids, b.attention_mask)
    for e, row in zip(episodes, lp):
        e.logprobs = [float(x) * k for x, k in zip(row, e.loss_mask)]
    grads = []
    for tis in ("none", "token"):
        m = copy.deepcopy(model)
        PolicyTrainer(m, 0, OptimConfig(lr=1e-2)).rl_step(copy.deepcopy(episodes), RLConfig(tis=tis))
        grads.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]))
    assert grads[0].norm() > 0
    assert torch.allclose(*grads, atol=1e-6, rtol=1e-4)
