"""End to end: the tool-calling agent against a real OpenAI-compatible server on loopback."""

import json

import pytest

from posttrain.errors import ConfigError, PosttrainError, TaskError
from posttrain.agent.harness.chatclient import ChatClient, RetryPolicy
from posttrain.evals.launch import EvalRequest, build_conditions, evaluate, read_tasks
from posttrain.evals.jobdir import JobDir
from posttrain.evals.runner import ToolExecutor, run_job
from posttrain.evals.trials import TaskSandboxes
from scripted_server import Script, serve


def _eval(tmp_path, task_dir, url, **kw):
    req = EvalRequest(str(task_dir), "scripted", k=kw.pop("k", 2), jobs=kw.pop("jobs", 2),
                      base_url=url, job=kw.pop("job", "j"), jobs_dir=str(tmp_path / "jobs"),
                      settings=kw)
    return evaluate(req)


def _run_with_fast_retries(tmp_path, task_dir, url, k=1):
    """run_job with a quick backoff, so retry-exhaustion tests take well under a second."""
    req = EvalRequest(str(task_dir), "scripted", k=k, jobs=2, base_url=url, job="r",
                      jobs_dir=str(tmp_path / "jobs"))
    tasks = read_tasks(req.tasks_dir)
    c = build_conditions(req, tasks)
    client = ChatClient(url, "scripted", retry=RetryPolicy(max_retries=2, base_delay_s=0.01))
    job = JobDir(tmp_path / "jobs" / "r").open(c)
    sandboxes = TaskSandboxes(tasks, "bwrap", warm=2)
    try:
        return job, run_job(job, tasks, c, ToolExecutor(client, c, sandboxes, 2))
    finally:
        job.close()
        sandboxes.close()
        client.close()


def test_oracle_through_tool_calls_writes_harbor_layout(tmp_path, task_dir, oracle):
    script = Script(oracle, fail_odd_attempts=True)
    with serve(script) as url:
        path, s = _eval(tmp_path, task_dir, url, k=2)
    assert s["n_tasks"] == 4 and s["k"] == 2 and s["complete"]
    assert s["counts"]["passed"] == 4 and s["counts"]["failed"] == 4
    assert s["mean_reward"] == pytest.approx(0.5)
    assert s["pass_at_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(1.0)}
    assert s["ci_low"] < 0.5 < s["ci_high"]
    assert s["tokens"]["input"] > 0 and s["tokens"]["output"] > 0
    on_disk = json.loads((path / "result.json").read_text())
    for key in ("n_tasks", "k", "pass_at_k", "mean_reward", "ci_low", "ci_high", "counts",
                "tokens", "cost"):
        assert key in on_disk
    trial = path / "heldout-0000-find-word__0"
    for rel in ("config.json", "result.json", "agent/trajectory.json", "verifier/reward.txt"):
        assert (trial / rel).is_file(), rel
    rec = json.loads((trial / "result.json").read_text())
    assert rec["status"] == "passed" and rec["verifier_result"]["rewards"]["reward"] == 1.0
    assert rec["timings"]["model_s"] > 0 and rec["timings"]["sandbox_s"] > 0
    traj = json.loads((trial / "agent/trajectory.json").read_text())
    assert traj["submitted"] and any(m["role"] == "tool" for m in traj["messages"])


def test_429_is_retried_then_succeeds(tmp_path, task_dir, oracle):
    with serve(Script(oracle, fail_first=3, fail_code=429)) as url:
        _, s = _eval(tmp_path, task_dir, url, k=1)
    assert s["counts"]["passed"] == 4


@pytest.mark.parametrize("code", [500, 429])
def test_persistent_errors_become_model_error(tmp_path, task_dir, code):
    with serve(Script(mode="status", status_code=code)) as url:
        job, s = _run_with_fast_retries(tmp_path, task_dir, url)
    assert s["counts"]["model_error"] == 4 and s["mean_reward"] == 0.0
    rec = job.records()[0]
    assert f"HTTP {code} after 3 tries" in rec.error


def test_malformed_tool_calls_end_as_model_error(tmp_path, task_dir):
    with serve(Script(mode="malformed")) as url:
        path, s = _eval(tmp_path, task_dir, url, k=1)
    assert s["counts"]["model_error"] == 4
    rec = json.loads((path / "heldout-0001-count-lines__0" / "result.json").read_text())
    assert rec["n_malformed"] == 3 and "without a usable tool call" in rec["error"]
    traj = json.loads((path / "heldout-0001-count-lines__0" / "agent/trajectory.json").read_text())
    assert "not valid JSON" in traj["messages"][3]["content"]


def test_no_tool_calls_and_context_overflow(tmp_path, task_dir):
    with serve(Script(mode="no_tools")) as url:
        _, s = _eval(tmp_path, task_dir, url, k=1, job="a")
    assert s["counts"]["model_error"] == 4
    with serve(Script(mode="overflow")) as url:
        _, s = _eval(tmp_path, task_dir, url, k=1, job="b")
    assert s["counts"]["context_overflow"] == 4


def test_unreachable_endpoint_is_a_clear_error(tmp_path, task_dir):
    from scripted_server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(PosttrainError, match="cannot reach the model endpoint"):
        _eval(tmp_path, task_dir, url)


def test_empty_task_dir_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError, match="empty"):
        _eval(tmp_path, tmp_path / "empty", "http://127.0.0.1:9/v1")


def test_changed_conditions_are_refused_and_resume_runs_only_missing(tmp_path, task_dir, oracle):
    script = Script(oracle)
    with serve(script) as url:
        path, s = _eval(tmp_path, task_dir, url, k=2)
        with pytest.raises(ConfigError, match="temperature"):
            _eval(tmp_path, task_dir, url, k=2, temperature=0.0)
        import shutil
        shutil.rmtree(path / "heldout-0002-config-value__1")
        (path / ".partial-heldout-0003-make-dir__0-dead").mkdir()  # left by a killed run
        before = script.requests
        path, s = _eval(tmp_path, task_dir, url, k=2)
        assert script.requests - before == 3  # one trial's bash + bash + submit
    assert s["n_trials"] == 8 and s["counts"]["passed"] == 8
    assert not list(path.glob(".partial-*"))


def test_price_table_gives_cost(tmp_path, task_dir, oracle):
    prices = tmp_path / "prices.toml"
    prices.write_text('[scripted]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n')
    with serve(Script(oracle)) as url:
        req = EvalRequest(str(task_dir), "scripted", k=1, jobs=2, base_url=url, job="p",
                          jobs_dir=str(tmp_path / "jobs"), prices=str(prices))
        _, s = evaluate(req)
    expected = (s["tokens"]["input"] * 1.0 + s["tokens"]["output"] * 2.0) / 1e6
    assert s["cost"]["total_usd"] == pytest.approx(expected)


def test_slow_endpoint_ends_as_agent_timeout_without_waiting_it_out(tmp_path, task_dir, oracle):
    import time

    with serve(Script(oracle, delay_s=3.0)) as url:
        t0 = time.perf_counter()
        _, s = _eval(tmp_path, task_dir, url, k=1, jobs=4, agent_timeout_s=0.5)
        wall = time.perf_counter() - t0
    assert s["counts"]["agent_timeout"] == 4
    assert wall < 2.5  # each trial stops at its 0.5 s deadline, not the server's 3 s
