"""Episode checkpoints in eval's tools protocol: a job SIGKILLed mid-trial, run again, resumes the
trial at its last completed turn with its sandbox files restored, and ends as an uninterrupted
run does."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from posttrain.evals.launch import EvalRequest, evaluate
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics
from scripted_server import Script, serve

CHILD = """
import sys
sys.path.insert(0, {here!r})
from test_tool_resume import run_eval
run_eval({tasks!r}, {url!r}, {jobs!r})
"""


def run_eval(tasks: str, url: str, jobs: str) -> tuple[Path, dict]:
    req = EvalRequest(tasks, "scripted", k=1, jobs=1, base_url=url, job="j", jobs_dir=jobs)
    return evaluate(req)


def staged_oracle(tasks: Path) -> dict[str, list[str]]:
    """Each create-file task's answer written to /tmp first and copied into place two turns later,
    so a resumed trial passes only if its sandbox files came back."""
    task = read_task(next(p for p in tasks.iterdir() if p.is_dir()))
    write, target = task.oracle_steps()[0].split(" > ")
    return {task.instruction: [f"{write} > /tmp/stage", "ls /tmp", f"cp /tmp/stage {target}"]}


def trial(jobs: Path) -> tuple[dict, dict]:
    d, = [p for p in (jobs / "j").iterdir() if p.is_dir() and "__" in p.name]
    return json.loads((d / "result.json").read_text()), json.loads((d / "agent/trajectory.json").read_text())


def test_sigkill_mid_trial_then_resume_equals_an_uninterrupted_run(tmp_path):
    tasks = tmp_path / "tasks"
    terminal_basics.generate(tasks, 1, seed=0, families=["create-file"])
    script = Script(staged_oracle(tasks))
    child = {}
    script.on_request = lambda n: os.kill(child["pid"], signal.SIGKILL) if n == 3 and child else None
    with serve(script) as url:
        run_eval(str(tasks), url, str(tmp_path / "whole"))
        whole, whole_traj = trial(tmp_path / "whole")
        assert whole["status"] == "passed" and script.requests == 4   # 3 commands, then submit
        assert not (tmp_path / "whole/j/.episodes").exists()

        script.requests = 0
        code = CHILD.format(here=str(Path(__file__).parent), tasks=str(tasks), url=url, jobs=str(tmp_path / "b"))
        proc = subprocess.Popen([sys.executable, "-c", code],
                                env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})
        child["pid"] = proc.pid
        assert proc.wait(timeout=120) == -signal.SIGKILL   # killed while turn 2 waited for its reply
        child.clear()
        assert any((tmp_path / "b/j/.episodes").iterdir())  # turns 0 and 1 were checkpointed

        script.requests = 0
        run_eval(str(tasks), url, str(tmp_path / "b"))
        assert script.requests == 2                         # only turn 2 (redone) and the submit
    resumed, traj = trial(tmp_path / "b")
    assert (resumed["status"], resumed["verifier_result"]) == (whole["status"], whole["verifier_result"])
    assert traj["messages"] == whole_traj["messages"]
    # the snapshot saved before turn 1's, the restore at turn 2, the snapshot after it (the last
    # turn's own snapshot is timed after its state was written, so it is listed in the next one)
    assert [(c["kind"], c["turn"]) for c in traj["checkpoints"]] == [("snapshot", 1), ("restore", 2), ("snapshot", 3)]
    assert not (tmp_path / "b/j/.episodes").exists()     # dropped once the trial was written
