"""The engine in a child process: the same tokens and logprobs as in-process, weights
through shared memory with versions, errors reported, nothing left behind."""

import copy
import os
import signal

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.engine.process import EngineProcessError, ProcessEngine

PROMPTS = [[1, 5, 6, 7]] * 4 + [[1, 9, 8]] * 2


@pytest.fixture(scope="module")
def policy(model):
    return copy.deepcopy(model)


@pytest.fixture(scope="module")
def engine(policy, tokenizer):
    with ProcessEngine(policy, tokenizer) as e:
        yield e


def _same(a, b) -> None:
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    assert max(abs(x - y) for c, d in zip(a, b) for x, y in zip(c.logprobs, d.logprobs)) <= 1e-6


def test_samples_what_the_in_process_engine_samples(engine, policy, tokenizer):
    params = SamplingParams(max_tokens=8, seed=3)
    _same(engine.generate(PROMPTS, params), LocalEngine(copy.deepcopy(policy), tokenizer).generate(PROMPTS, params))


def test_weight_updates_arrive_with_their_version(engine, policy, tokenizer):
    params = SamplingParams(max_tokens=8, seed=4)
    before = engine.generate(PROMPTS, params)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    engine.update_weights(policy.state_dict(), 7)
    after = engine.generate(PROMPTS, params)
    assert engine.policy_version == 7 and {c.policy_version for c in after} == {7}
    assert {c.policy_version for c in before} != {7}
    _same(after, LocalEngine(copy.deepcopy(policy), tokenizer).generate(PROMPTS, params))


def test_a_bad_request_is_an_error_and_the_engine_keeps_serving(engine):
    with pytest.raises(EngineProcessError, match="engine process, generate"):
        engine.generate([[]], SamplingParams(max_tokens=2))
    assert len(engine.generate([[1, 2]], SamplingParams(max_tokens=2, seed=0))) == 1


def test_a_dead_child_is_a_clear_error_and_close_leaves_nothing(model, tokenizer):
    e = ProcessEngine(model, tokenizer)
    mapped = os.readlink(f"/proc/self/fd/{e._shared._fd}")      # this engine's file, not others'
    assert os.path.basename(mapped).startswith("posttrain-weights-")
    assert mapped.endswith(" (deleted)")                          # unlinked once mapped
    os.kill(e._proc.pid, signal.SIGKILL)
    e._proc.wait()
    with pytest.raises(EngineProcessError, match="died"):
        e.generate([[1, 2]], SamplingParams(max_tokens=2))
    e.close()
    assert e._proc.poll() is not None


def test_an_moe_model_in_a_child_process_returns_the_same_routing():
    from posttrain.models.tiny import build_tiny_model

    moe = build_tiny_model(300, "tiny-moe", seed=1)
    params = SamplingParams(temperature=1.0, max_tokens=6, seed=1)
    with ProcessEngine(moe, None) as child:
        got = child.generate(PROMPTS, params)
    want = LocalEngine(moe).generate(PROMPTS, params)
    _same(got, want)
    assert [c.routing for c in got] == [c.routing for c in want] and got[0].routing
