"""algo.exact_logprobs in a real synchronous RL run: a batch_invariant fp32 engine samples, the
trainer's packed forward scores with exact attention, and the pipeline's own mismatch metrics
read 0 on every step (without the knob they do not)."""

import copy

import pytest

from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.pipeline import Pipeline
from posttrain.rollout.weights import LockedEngine
from posttrain.schedule.sampler import TaskSampler
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig


def run(make_parts, tokenizer, exact: bool, steps: int = 3, **algo_kw) -> list[dict]:
    env, model, _ = make_parts(max_tokens=8)
    engine = LockedEngine(LocalEngine(copy.deepcopy(model), tokenizer, config=EngineConfig(batch_invariant=True)))
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
    algo = RLConfig(tis="token", exact_logprobs=exact, **algo_kw)
    rc = RolloutConfig(steps=steps, groups_per_step=2, group_size=env.group_size, max_staleness=0)
    rows = []
    Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0), rc, algo).run(lambda s, stats: rows.append(stats))
    return rows


def test_exact_logprobs_leave_no_mismatch_on_any_step(make_parts, tokenizer):
    rows = run(make_parts, tokenizer, exact=True)
    assert len(rows) == 3 and all(r["tokens"] > 0 for r in rows)
    assert [r["mismatch_max_abs"] for r in rows] == [0.0] * 3
    assert [r["mismatch_k3"] for r in rows] == [0.0] * 3
    assert [r["ess"] for r in rows] == [1.0] * 3
    assert rows[0]["grad_norm"] > 0  # it trains: the policy moved, and the engine followed each step


def test_without_the_knob_the_same_run_shows_a_mismatch(make_parts, tokenizer):
    rows = run(make_parts, tokenizer, exact=False, steps=2)
    assert max(r["mismatch_max_abs"] for r in rows) > 0


@pytest.mark.parametrize("algo_kw", [{"trim_last_layer": False}, {"packed": False}], ids=["untrimmed", "hf"])
def test_every_trainer_forward_is_exact(make_parts, tokenizer, algo_kw):
    """The packed forward without the last-layer trim (the quickstart's), and the HF forward
    (algo.packed=False, or a model the packed forward does not cover) with exact attention."""
    rows = run(make_parts, tokenizer, exact=True, steps=2, **algo_kw)
    assert [r["mismatch_max_abs"] for r in rows] == [0.0] * 2


@pytest.mark.parametrize("where", ['cluster.executor="ray"', 'engines.kind="vllm"'])
def test_the_knob_is_refused_where_the_engine_would_not_be_exact(where):
    from posttrain.errors import ConfigError
    from posttrain.recipes.rl.config import load_rl_config

    assert load_rl_config(None, ["algo.exact_logprobs=true"]).algo.exact_logprobs
    assert load_rl_config(None, ["algo.exact_logprobs=true", 'engines.kind="process"']).algo.exact_logprobs
    with pytest.raises(ConfigError, match="exact_logprobs needs the embedded engine"):
        load_rl_config(None, ["algo.exact_logprobs=true", where])
