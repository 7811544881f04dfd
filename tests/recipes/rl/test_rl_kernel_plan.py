"""summary.json's kernel_plan for `posttrain rl` (recipes/rl/engines.py kernel_plan_of): the plan the
paged engine of the embedded and process kinds runs here; none for vLLM servers."""

from types import SimpleNamespace

from posttrain.engine.paged.dtypes import DtypeChoice
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.recipes.rl.engines import kernel_plan_of


def _cfg(kind: str, exact: bool = False):
    return SimpleNamespace(engines=SimpleNamespace(kind=kind, compute_dtype=DtypeChoice("float32", "asked")),
                           algo=SimpleNamespace(exact_logprobs=exact))


def test_the_summary_records_the_plan_the_engine_runs():
    model = build_tiny_model(64, seed=0)
    for exact in (False, True):
        engine = LocalEngine(model, config=EngineConfig(dtype="float32", batch_invariant=exact))
        assert kernel_plan_of(_cfg("embedded", exact), model) == engine.plan.as_dict()
    assert kernel_plan_of(_cfg("process"), model)["dtype"] == "float32"
    assert kernel_plan_of(_cfg("vllm"), model) is None
