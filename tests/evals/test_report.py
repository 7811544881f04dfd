"""Reports and paired comparisons written from real job directories."""

import json
import math

from typer.testing import CliRunner

from posttrain.cli import _register_all, app
from posttrain.evals.launch import EvalRequest, evaluate
from scripted_server import Script, serve


def _job(tmp_path, task_dir, url, name, **settings):
    req = EvalRequest(str(task_dir), "scripted", k=3, jobs=3, base_url=url, job=name,
                      jobs_dir=str(tmp_path / "jobs"), settings=settings)
    return evaluate(req)[0]


def test_report_and_compare(tmp_path, task_dir, oracle):
    with serve(Script(oracle, fail_odd_attempts=True)) as url:
        a = _job(tmp_path, task_dir, url, "a")
    with serve(Script(oracle)) as url:
        b = _job(tmp_path, task_dir, url, "b")
    _register_all()
    r = CliRunner().invoke(app, ["eval", "report", str(a)])
    assert r.exit_code == 0, r.output
    page = (a / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "<script" not in page
    assert json.loads((a / "summary.json").read_text())["mean_reward"] == 2 / 3

    r = CliRunner().invoke(app, ["eval", "compare", str(a), str(a)])
    assert r.exit_code == 0, r.output
    same = json.loads((a / "compare-a.json").read_text())
    assert same["diff"] == 0 and same["p_value"] == 1.0
    assert same["correlation"] is None  # every task scores 2/3 in A: undefined, written as null

    r = CliRunner().invoke(app, ["eval", "compare", str(a), str(b)])
    assert r.exit_code == 0, r.output
    d = json.loads((a / "compare-b.json").read_text())
    assert d["n_tasks"] == 4 and math.isclose(d["diff"], 2 / 3 - 1)
    printed = " ".join(r.output.split())                                  # the console wraps lines
    assert d["conditions_differing"] == [] and "conditions that differ besides the model: none" in printed
    assert d["method"] == "zero-spread bound" and d["ci_low"] < d["diff"] < d["ci_high"]  # every task -1/3
    assert "smallest difference these tasks detect" in printed

    with serve(Script(oracle)) as url:
        c = _job(tmp_path, task_dir, url, "c", temperature=0.0, max_turns=5)
    r = CliRunner().invoke(app, ["eval", "compare", str(c), str(a)])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())                                     # the console wraps lines
    assert "temperature: 0.0 -> 0.7" in flat and "max_turns: 5 -> 20" in flat
    assert (a / "compare-b.html").read_text().count("data:image/png;base64,") == 3




def test_compare_prints_the_smallest_detectable_difference(tmp_path):
    from posttrain.evals.conditions import EvalConditions
    from posttrain.evals.jobdir import JobDir
    from posttrain.evals.record import TrialOutput, TrialRecord

    per_task = {"a": [[1, 1], [1, 0], [0, 0], [1, 1]], "b": [[0, 0], [1, 0], [0, 0], [1, 0]]}
    for name, tasks in per_task.items():
        job = JobDir(tmp_path / name).open(EvalConditions(model=name, protocol="tools", k=2))
        for t, scores in enumerate(tasks):
            for i, s in enumerate(scores):
                job.write_trial(TrialOutput(TrialRecord(f"t{t}", i, "passed" if s else "failed", float(s)), {}), {})
        job.close()
    _register_all()
    r = CliRunner().invoke(app, ["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    mdd = json.loads((tmp_path / "a" / "compare-b.json").read_text())["min_detectable_difference_80pct_power"]
    sd = math.sqrt(0.6875 / 3)                    # d = [1, 0, 0, .5], as in test_stats' worked example
    assert mdd == __import__("pytest").approx(2.8015852 * sd / 2, rel=1e-6)
    assert f"smallest difference these tasks detect (80% power, 5%): {mdd:.3f}" in " ".join(r.output.split())
