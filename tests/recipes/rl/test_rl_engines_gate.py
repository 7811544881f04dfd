"""The embedded and process engines of `posttrain rl` go through the conformance gate the
vLLM path uses: checked at start, then every engines.check_every weight updates, and a
perturbed engine weight is caught with its likely cause."""

import json

import pytest
import torch

from posttrain.errors import PosttrainError
from posttrain.models.tiny import build_tiny_model, build_tokenizer
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.engines import rollout_engine
from posttrain.rollout.conformance import GatedEngine, gate_limits
from posttrain.rollout.envs import SingleTurnEnv
from posttrain.rollout.single_turn import copy_prompts, similarity_reward

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=64, max_position_embeddings=128)


def _parts():
    prompts = copy_prompts(8, 0)
    tok = build_tokenizer([p.text for p in prompts] + [p.target for p in prompts], vocab_size=300)
    model = build_tiny_model(len(tok), seed=0, **SMALL)
    env = SingleTurnEnv(prompts, tok, similarity_reward, group_size=2, max_tokens=4, max_context=128,
                        stop_token_ids=[tok.convert_tokens_to_ids("<|end|>")])
    return tok, model, env


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / "conformance.jsonl").open()]


@pytest.mark.parametrize("kind", ["embedded", "process"])
def test_embedded_engines_are_gated_at_start_and_every_nth_update(tmp_path, kind):
    tok, model, env = _parts()
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', f'engines.kind="{kind}"',
                                "engines.check_every=2", "engines.probes=2", "engines.probe_tokens=4"])
    with rollout_engine(cfg, model, tok, env) as (engine, _):
        assert isinstance(engine, GatedEngine)
        for version in (1, 2, 3, 4):
            engine.publish(model, version)
    rows = _rows(cfg.run_dir)
    assert [(r["version"], r["at_start"], r["over"]) for r in rows] == [
        (0, True, False), (2, False, False), (4, False, False)]


def test_the_check_interval_defaults_by_engine_kind():
    from posttrain.engine.fleet.config import EMBEDDED_CHECK_EVERY, EnginesConfig

    assert EnginesConfig(kind="vllm").check_interval == 1
    assert EnginesConfig().check_interval == EMBEDDED_CHECK_EVERY
    assert EnginesConfig(check_every=0).check_interval == 0


def test_a_perturbed_embedded_weight_is_caught(tmp_path):
    tok, model, env = _parts()
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', "engines.probes=2", "engines.probe_tokens=6"])
    with rollout_engine(cfg, model, tok, env) as (engine, _):
        engine.publish(model, 1)
        with torch.no_grad():  # a failed update: the engine's copy drifts from the trainer's
            next(engine.engine.model.parameters()).add_(0.5)
        engine.engine.runner.weights_changed()
        assert engine.check(model, 1).max_abs > gate_limits(cfg.engines, "float32")[0]
    last = _rows(cfg.run_dir)[-1]
    assert last["over"] and last["why"].startswith("weights")


@pytest.mark.parametrize("kind", ["embedded", "process"])
def test_a_bf16_engine_runs_bf16_under_the_bf16_limits(tmp_path, kind):
    tok, model, env = _parts()
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', f'engines.kind="{kind}"', 'engines.dtype="bfloat16"',
                                "engines.probes=2", "engines.probe_tokens=6"])
    with rollout_engine(cfg, model, tok, env) as (engine, _):
        report = engine.last
        if kind == "embedded":
            assert engine.engine.dtype.name == "bfloat16"
    assert report.max_abs > 0  # bf16 rounding shows against the fp32 trainer ...
    assert (report.max_abs, report.mean_abs) <= gate_limits(cfg.engines, "bfloat16")  # ... within its limits


def test_a_bf16_gap_above_set_limits_is_named_as_dtype(tmp_path):
    tok, model, env = _parts()
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', 'engines.dtype="bfloat16"', "engines.max_abs_logp=1e-7",
                                "engines.probes=2", "engines.probe_tokens=6"])
    with pytest.raises(PosttrainError, match="dtype: the engine runs bfloat16, the trainer float32"):
        with rollout_engine(cfg, model, tok, env):
            pass


def test_gate_limits_follow_the_engine_dtype_unless_set():
    from posttrain.engine.fleet.config import EnginesConfig
    from posttrain.rollout.conformance import GATE_LIMITS

    assert gate_limits(EnginesConfig(), "float32") == GATE_LIMITS["float32"]
    assert gate_limits(EnginesConfig(), "bfloat16") == GATE_LIMITS["bfloat16"]
    assert gate_limits(EnginesConfig(mean_abs_logp=0.2), "bfloat16") == (GATE_LIMITS["bfloat16"][0], 0.2)


@pytest.mark.parametrize("sets, match", [
    (['engines.dtype="bfloat16"', "algo.exact_logprobs=true"], "needs a float32 engine"),
    (['engines.dtype="bfloat16"', 'cluster.executor="ray"'], "Ray engine replicas run float32"),
])
def test_engine_dtypes_a_run_cannot_honour_are_refused(tmp_path, sets, match):
    with pytest.raises(PosttrainError, match=match):
        load_rl_config(None, [f'runs_dir="{tmp_path}"', *sets])
