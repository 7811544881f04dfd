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
    assert d["conditions_differing"] == []
    assert (a / "compare-b.html").read_text().count("data:image/png;base64,") == 3


