"""Kill an eval job with SIGKILL midway, rerun the same command: every trial exactly once."""

import json
import os
import signal
import subprocess
import sys
import time

from scripted_server import Script, serve

K = 3


def _cmd(task_dir, url, jobs_dir):
    code = "from posttrain.cli import main; main()"
    return [sys.executable, "-c", code, "eval", "--tasks", str(task_dir), "--model", "scripted",
            "--base-url", url, "-k", str(K), "--jobs", "2", "--jobs-dir", str(jobs_dir)]


def _finished(jobs_dir):
    """Trials wholly written (a hidden .partial-* dir is one the kill caught mid-write)."""
    return {p.parent.name: p.read_text() for p in jobs_dir.glob("*/*/result.json")
            if not p.parent.name.startswith(".")}


def test_sigkill_then_resume_runs_every_trial_once(tmp_path, task_dir, oracle):
    jobs_dir = tmp_path / "jobs"
    with serve(Script(oracle, delay_s=0.1)) as url:
        proc = subprocess.Popen(_cmd(task_dir, url, jobs_dir), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + 60
        while len(_finished(jobs_dir)) < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = _finished(jobs_dir)
        assert 3 <= len(before) < 4 * K, "the kill should land midway"

        r = subprocess.run(_cmd(task_dir, url, jobs_dir), capture_output=True, text=True,
                           timeout=120, env={**os.environ, "COLUMNS": "200"})
        assert r.returncode == 0, r.stderr
    (job,) = [p for p in jobs_dir.iterdir() if p.is_dir()]
    trials = sorted(p.name for p in job.iterdir() if p.is_dir())
    expected = sorted(f"{t.name}__{a}" for t in task_dir.iterdir() for a in range(K))
    assert trials == expected  # each trial once, no leftovers of half-written ones
    after = _finished(jobs_dir)
    assert all(after[name] == text for name, text in before.items())  # not re-run
    s = json.loads((job / "result.json").read_text())
    assert s["complete"] and s["n_trials"] == 4 * K and s["counts"]["passed"] == 4 * K
    assert s["last_run"]["trials_run"] == 4 * K - len(before)


def test_sigterm_says_how_many_trials_are_saved_and_how_to_resume(tmp_path, task_dir, oracle):
    jobs_dir = tmp_path / "jobs"
    with serve(Script(oracle, delay_s=0.1)) as url:
        proc = subprocess.Popen(_cmd(task_dir, url, jobs_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "COLUMNS": "200"})
        deadline = time.time() + 60
        while len(_finished(jobs_dir)) < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    line = next((x for x in out.splitlines() if x.startswith("stopped: ")), out)
    assert f" of {4 * K} trials saved in " in line and line.endswith("rerun the same command to resume"), out
    said = int(line.split()[1])        # a trial written just as the signal came may be one more
    assert said in (len(_finished(jobs_dir)), len(_finished(jobs_dir)) - 1) and said >= 3
    assert sum(x.startswith("trial ") for x in out.splitlines()) >= 3    # a line per trial in a pipe
