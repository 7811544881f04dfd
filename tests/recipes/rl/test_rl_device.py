"""`posttrain rl` chooses its device once (`device`): the policy goes there and the trainer, the
reference and the embedded engine follow it; summary.json records the choice. Here, with no GPU,
"auto" is the CPU, and naming it gives the same run."""

import json

import pytest
import torch

from posttrain.errors import ConfigError
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config


def _cfg(tmp_path, name: str, *sets: str):
    return load_rl_config(None, [f"runs_dir={json.dumps(str(tmp_path))}", f"name={json.dumps(name)}",
                                 "tasks.kind=copy", "tasks.n_train=4", "tasks.n_eval=2", "policy.sft_steps=2",
                                 "rollout.steps=2", "rollout.max_staleness=0", "algo.kl_coef=0.05", *sets])


def _metrics(path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.endswith("_s") and "frac" not in k}
            for line in path.open()]


def test_an_rl_run_records_its_device_and_runs_alike_with_it_named(tmp_path):
    auto = run_rl(_cfg(tmp_path, "auto"))
    named = run_rl(_cfg(tmp_path, "cpu", 'device="cpu"'))
    assert auto["device"] == named["device"] and auto["device"]["device"] == "cpu" and auto["device"]["gpu"] is None
    assert json.loads((tmp_path / "auto" / "summary.json").read_text())["device"] == auto["device"]
    assert auto["kernel_plan"] == named["kernel_plan"] and auto["eval_after"] == named["eval_after"]
    assert _metrics(tmp_path / "auto" / "metrics.jsonl") == _metrics(tmp_path / "cpu" / "metrics.jsonl")


def test_a_gpu_asked_for_where_there_is_none_stops_before_the_run(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="torch sees no CUDA GPU"):
        run_rl(_cfg(tmp_path, "gpu", 'device="cuda"'))
    assert not (tmp_path / "gpu").exists()


def test_the_process_engine_is_refused_for_a_policy_on_a_gpu(monkeypatch):
    from posttrain.recipes.rl import engines as rl_engines

    monkeypatch.setattr(rl_engines, "module_device", lambda model: torch.device("cuda"))  # no CUDA op runs
    with pytest.raises(ConfigError, match='engines.kind = "process" runs its engine on a CPU core'):
        with rl_engines.process_engine(None, None, None, None):
            pass
