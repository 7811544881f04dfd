"""`posttrain plan` on a real (tiny) run directory: costs fitted from its metrics and
events, candidates simulated, a recommendation printed; a directory that is no run is one line."""

import json
import subprocess
import sys

from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.events import EventLog
from posttrain.rollout.pipeline import Pipeline
from posttrain.schedule.planner import fit_costs, shared_cores
from posttrain.schedule.sampler import TaskSampler
from posttrain.train.metrics import MetricsLog
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig


def test_plan_recommends_from_a_real_run(make_parts, tmp_path):
    env, model, engine = make_parts(n=8, group_size=4)
    rc = RolloutConfig(steps=3, groups_per_step=2, group_size=4, max_staleness=1, workers=2,
                       groups_per_wave=1, filter_zero_variance=False)
    events, log = EventLog(tmp_path / "events.jsonl"), MetricsLog(tmp_path)
    pipe = Pipeline(env, engine, PolicyTrainer(model, 0, OptimConfig(lr=1e-2)), TaskSampler(env.task_ids, 0),
                    rc, RLConfig(tis="token"), events)
    pipe.run(lambda step, stats: log.log("rl", step, stats))
    events.close()
    log.close()
    (tmp_path / "config.json").write_text(json.dumps({"rollout": rc.model_dump()}))
    costs, rollout = fit_costs(tmp_path)
    assert costs.train_s > 0 and costs.gen_s and set(costs.verify_s) == {"default"}
    out = tmp_path / "plan.json"
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "plan", str(tmp_path), "--devices", "3",
                        "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "recommended:" in r.stdout
    rows = json.loads(out.read_text())
    assert {(x["engines"], x["trainer_ranks"]) for x in rows} == {(1, 2), (2, 1)}
    assert rows[0]["groups_per_s"] >= rows[-1]["groups_per_s"]
    # The same measurements from a run whose engine was a vLLM server: nothing to divide out,
    # so its fitted costs are the raw ones, above the embedded run's.
    (tmp_path / "config.json").write_text(json.dumps({"rollout": rc.model_dump(), "engines": {"kind": "vllm"}}))
    served, _ = fit_costs(tmp_path)
    assert served.train_s > costs.train_s and sum(served.gen_s) >= sum(costs.gen_s)


def test_the_fit_knows_whether_the_engine_shared_the_trainers_cores():
    def cfg(kind, pin=None, tasks="dir"):
        return {"engines": {"kind": kind, "pin_cores": pin}, "tasks": {"kind": tasks}}

    assert shared_cores({}) and shared_cores(cfg("embedded"))
    assert not shared_cores(cfg("vllm"))
    assert shared_cores(cfg("process", pin=False)) and not shared_cores(cfg("process", pin=True))
    assert shared_cores(cfg("process")) and not shared_cores(cfg("process", tasks="copy"))


def test_plan_on_a_directory_that_is_no_run_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "plan", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "metrics.jsonl" in r.stderr
