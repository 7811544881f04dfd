"""The engine built from its kernel plan (kernels/plan.py; the plan's table: tests/kernels/test_plan_table.py):
the linears are the plan's classes, the plan is logged once at start and readable as a dict."""

import json
import logging
from dataclasses import replace

from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.kernel_plan import config_plan
from posttrain.engine.paged.local import LocalEngine
from posttrain.kernels import gemv
from posttrain.kernels.gemv_linear import GemvLinear
from posttrain.kernels.packed import GEMM_CLASSES
from posttrain.kernels import plan as kernel_plans
from posttrain.kernels.plan import kernel_plan


def test_an_engine_runs_the_plan_it_states_and_prints_it_once(model, caplog):
    kernel_plans.say.cache_clear()
    with caplog.at_level(logging.WARNING, logger="posttrain.kernels.plan"):
        engine = LocalEngine(model, config=EngineConfig(dtype="float32"))
        LocalEngine(model, config=EngineConfig(dtype="float32"))  # the same plan again: not printed again
    plan = engine.plan
    options = replace(engine.options, attention=engine.attention_backend[0])
    assert plan == kernel_plan("float32", gemv.cpu_flags(), options)
    assert plan == config_plan(EngineConfig(dtype="float32"), model.config)  # what a run's summary records
    assert [r.getMessage() for r in caplog.records].count(plan.line()) == 1
    for layer in engine.runner.linears:
        for lin in layer.values():
            if plan.gemv is None:
                assert type(lin) is GEMM_CLASSES[plan.gemm]
            else:
                assert type(lin) is GemvLinear and type(lin.rest) is GEMM_CLASSES[plan.gemm] and lin.kind == plan.gemv
    assert engine.greedy_prefix_invariant == (plan.greedy_prefix_invariant, plan.reason)
    assert json.loads(json.dumps(plan.as_dict()))["gemm"] == plan.gemm


def test_a_batch_invariant_engine_plans_mkl_and_float64_attention(model):
    engine = LocalEngine(model, config=EngineConfig(dtype="float32", batch_invariant=True))
    assert engine.plan.as_dict()["linear"] == {"1+": "mkl"} and engine.plan.attention == "torch-float64"
    assert engine.batch_invariant == engine.plan.batch_invariant and engine.exact_attention
