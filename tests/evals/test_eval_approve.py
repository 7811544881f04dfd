"""`posttrain eval --approve` on a real terminal: the CLI runs in a tmux session, the test reads
the pane and answers with `tmux send-keys`. The tiny model is fine-tuned to solve a make-dir task
with one mkdir (make_dir_model.py); the rule matches that mkdir. Denied in attempt 0 (the reason
is the observation and the task fails), allowed in attempt 1 (it runs and the task passes).
Then the same job with the HTTP reviewer, denied by a client; the tools protocol over HTTP; and
the reviewer options' errors."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from make_dir_model import make_dir_checkpoint

from posttrain.agent.approval_terminal import QUESTION
from posttrain.errors import ConfigError
from posttrain.evals.approvers import open_approver, parse_address
from posttrain.evals.conditions import EvalConditions
from posttrain.evals.launch import EvalRequest, evaluate

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    return make_dir_checkpoint(tmp_path_factory.mktemp("approve"))[:2]


class Tmux:
    """One tmux server on its own socket, one session running `command`."""

    def __init__(self, name: str, command: str):
        assert shutil.which("tmux"), "tmux is missing: bash scripts/ci/tmux.sh installs it"
        self.base = ["tmux", "-L", name]
        subprocess.run(self.base + ["new-session", "-d", "-s", "eval", "-x", "200", "-y", "50",
                                    command], check=True)

    def text(self) -> str:
        return subprocess.run(self.base + ["capture-pane", "-p", "-J", "-S", "-", "-t", "eval"],
                              check=True, capture_output=True, text=True).stdout

    def type(self, line: str) -> None:
        subprocess.run(self.base + ["send-keys", "-t", "eval", line, "Enter"], check=True)

    def close(self) -> None:
        subprocess.run(self.base + ["kill-server"], capture_output=True)


def answer_until_done(tmux: Tmux, exit_file: Path, deadline_s: float = 300.0) -> str:
    """Answer each question on the pane: deny attempt 0's, allow attempt 1's."""
    answered, end = 0, time.monotonic() + deadline_s
    while not exit_file.exists():
        assert time.monotonic() < end, "the eval did not finish:\n" + tmux.text()
        text = tmux.text()
        if text.count(QUESTION.strip()) > answered:
            attempt = text.rsplit("[approval]", 1)[1].split("(attempt ", 1)[1][0]
            tmux.type("n not on my machine" if attempt == "0" else "y")
            answered += 1
        time.sleep(0.2)
    return tmux.text()


def test_eval_approve_asks_on_the_terminal(tmp_path, tuned):
    task_dir, ckpt = tuned
    jobs, exit_file = tmp_path / "jobs", tmp_path / "exit_code"
    argv = [sys.executable, "-m", "posttrain", "eval", "--tasks", str(task_dir), "--model", str(ckpt),
            "-k", "2", "--jobs", "1", "--job", "approve", "--jobs-dir", str(jobs), "--temperature", "0",
            "--max-turns", "2", "--max-reply-tokens", "64", "--approve", "--approve-rule", r"^mkdir\b"]
    env = f"env PYTHONPATH={shlex.quote(str(SRC))} COLUMNS=200"
    command = f"{env} {shlex.join(argv)}; echo $? > {exit_file}; read"
    tmux = Tmux(f"posttrain-approve-{os.getpid()}", command)
    try:
        pane = answer_until_done(tmux, exit_file)
    finally:
        tmux.close()
    assert exit_file.read_text().strip() == "0", pane
    assert "wants to run:" in pane and "denied" in pane and "allowed" in pane
    trials = {}
    for attempt in (0, 1):
        trial = next(jobs.glob(f"approve/*__{attempt}"))
        trials[attempt] = (json.loads((trial / "result.json").read_text()),
                           json.loads((trial / "agent" / "trajectory.json").read_text())["turns"])
    (denied, turns0), (allowed, turns1) = trials[0], trials[1]
    assert turns0[0]["kind"] == "denied" and turns0[0]["action"].startswith("mkdir")
    assert turns0[0]["observation"] == "Action denied by the reviewer: not on my machine"
    assert turns0[0]["approval"]["allow"] is False and turns0[0]["approval"]["by"] == "terminal"
    assert denied["reward"] == 0.0 and denied["status"] == "failed"
    assert turns1[0]["kind"] == "bash" and turns1[0]["approval"]["allow"] is True
    assert allowed["reward"] == 1.0 and allowed["status"] == "passed"
    conditions = json.loads((jobs / "approve" / "config.json").read_text())["conditions"]
    assert conditions["approval"] == [r"^mkdir\b"]


def test_eval_approve_http_a_client_denies(tmp_path, tuned):
    task_dir, ckpt = tuned
    approver, rules = open_approver(False, "127.0.0.1:0", [r"^mkdir\b"], 120.0, "POSTTRAIN_NO_SUCH_TOKEN")
    req = EvalRequest(str(task_dir), str(ckpt), k=1, jobs=1, job="http", jobs_dir=str(tmp_path / "jobs"),
                      settings={"temperature": 0.0, "max_reply_tokens": 64, "max_turns": 2},
                      approval_rules=rules, approver=approver)
    done = {}
    thread = threading.Thread(target=lambda: done.update(zip(("path", "summary"), evaluate(req))), daemon=True)
    thread.start()
    denied, end = 0, time.monotonic() + 300
    try:
        with httpx.Client(timeout=10) as client:
            while thread.is_alive():      # deny whatever waits, until the job ends
                assert time.monotonic() < end, "the eval did not finish"
                for p in client.get(approver.url).json()["pending"]:
                    denied += client.post(f"{approver.url}/{p['id']}", json={
                        "allow": False, "reason": "over http"}).status_code == 200
                time.sleep(0.05)
    finally:
        approver.close()
        thread.join(timeout=60)
    assert denied >= 1 and done["summary"]["counts"]["failed"] == 1
    turns = json.loads(next(done["path"].glob("*__0/agent/trajectory.json")).read_text())["turns"]
    assert turns[0]["kind"] == "denied" and turns[0]["observation"].endswith("over http")
    assert turns[0]["approval"]["by"] == "http"


def test_reviewer_options_are_checked():
    assert parse_address("8765") == ("127.0.0.1", 8765) and parse_address("0.0.0.0:80") == ("0.0.0.0", 80)
    assert open_approver(False, None, [], 1.0, "X") == (None, [])
    for args, message in [((True, "1", []), "pick one"), ((False, None, ["^rm"]), "needs --approve"),
                          ((True, None, ["(bad"]), "not a regex"), ((False, "nope", []), "HOST:"),
                          ((False, "0.0.0.0:0", []), "without a token: set the environment variable "
                                                     "POSTTRAIN_NO_SUCH_TOKEN")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            open_approver(*args, 1.0, "POSTTRAIN_NO_SUCH_TOKEN")
    rules = EvalConditions(model="m", protocol="text", k=1, approval=("^rm",))
    assert rules.to_dict()["approval"] == ["^rm"] and EvalConditions.from_dict(rules.to_dict()) == rules
    assert "approval" not in EvalConditions(model="m", protocol="text", k=1).to_dict()


def test_tools_protocol_denied_over_http(tmp_path, task_dir, oracle):
    from scripted_server import Script, serve

    approver, rules = open_approver(False, "0", ["."], 120.0, "POSTTRAIN_NO_SUCH_TOKEN")
    done = {}
    with serve(Script(oracle)) as url:
        req = EvalRequest(str(task_dir), "scripted", k=1, jobs=2, base_url=url, job="tools",
                          jobs_dir=str(tmp_path / "jobs"), approval_rules=rules, approver=approver)
        thread = threading.Thread(target=lambda: done.update(zip(("path", "summary"), evaluate(req))),
                                  daemon=True)
        thread.start()
        end = time.monotonic() + 300
        try:
            with httpx.Client(timeout=10) as client:
                while thread.is_alive():
                    assert time.monotonic() < end, "the eval did not finish"
                    for p in client.get(approver.url).json()["pending"]:
                        client.post(f"{approver.url}/{p['id']}", json={"allow": False, "reason": "no"})
                    time.sleep(0.05)
        finally:
            approver.close()
            thread.join(timeout=60)
    s = done["summary"]
    assert s["protocol"] == "tools" and s["counts"]["failed"] == s["n_trials"] == len(oracle)
    traj = json.loads(next(done["path"].glob("*__0/agent/trajectory.json")).read_text())
    tool_replies = [m["content"] for m in traj["messages"] if m["role"] == "tool"]
    assert tool_replies[0] == "Action denied by the reviewer: no" and traj["submitted"]
    assert traj["approvals"][0]["allow"] is False and traj["approvals"][0]["by"] == "http"
