"""Difficulty calibration with a policy behind Engine.generate: pass@k over k episodes
places each task as too easy, learnable or too hard for that policy."""

import json
import subprocess
import sys

import pytest

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.engine.base import Engine, SamplingParams
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy
from posttrain.tasks.suites import terminal_basics
from posttrain.types import Completion
from posttrain.validate.difficulty import calibrate, label


class ScriptedPolicy(Engine):
    """A policy that plays each task's oracle steps: always, never, or every other episode."""

    def __init__(self, tokenizer, tasks, modes):
        self.tok, self.tasks, self.modes, self.started = tokenizer, tasks, modes, {}

    def _reply(self, prompt: list[int]) -> str:
        text = self.tok.decode(prompt, skip_special_tokens=False)
        task = next(t for t in self.tasks if t.instruction.strip() in text)
        turn = text.count("<|assistant|>") - 1
        if turn == 0:     # decide per episode; later turns follow from the first reply
            n = self.started[task.id] = self.started.get(task.id, 0) + 1
            mode = self.modes[task.id]
            solve = mode == "always" or (mode == "alternate" and n % 2 == 0)
        else:
            solve = "echo wrong" not in text
        steps = task.oracle_steps() if solve else ["echo wrong > /app/answer.txt"]
        return f"<bash>{steps[turn]}</bash>" if turn < len(steps) else "<submit/>"

    def generate(self, prompts, params):
        out = []
        for p in prompts:
            ids = self.tok.encode(self._reply(p) + "<|end|>", add_special_tokens=False)
            out.append(Completion(ids, [0.0] * len(ids), "stop"))
        return out


def test_labels():
    assert [label(4, 4), label(0, 4), label(1, 4), label(0, 0)] == [
        "too easy", "too hard", "learnable", "unknown"]


def test_calibration_places_tasks(tmp_path):
    tasks = terminal_basics.generate(tmp_path, 3, seed=5, families=["count-lines", "make-dir"])
    tok = build_tokenizer([t.instruction for t in tasks] * 20, vocab_size=400)
    modes = dict(zip([t.id for t in tasks], ["always", "never", "alternate"]))
    policy = ScriptedPolicy(tok, tasks, modes)
    cfg = AgentConfig(max_turns=4, max_reply_tokens=200, workers=2)
    got = calibrate(tasks, policy, ChatFramer(tok), 4, SamplingParams(), cfg, "scripted")
    assert [got[t.id]["label"] for t in tasks] == ["too easy", "too hard", "learnable"]
    third = got[tasks[2].id]
    assert third["successes"] == 2 and third["pass@1"] == 0.5 and 0.5 < third["pass@k"] <= 1


@pytest.mark.slow
def test_cli_policy_calibrates_and_resumes(tmp_path):
    terminal_basics.generate(tmp_path / "tasks", 1, seed=0, families=["make-dir"])
    tok = build_tokenizer(["<bash>mkdir -p /app/x</bash>"] * 50, vocab_size=300)
    save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path / "ckpt")
    cmd = [sys.executable, "-m", "posttrain.cli", "validate", str(tmp_path / "tasks"), "--out",
           str(tmp_path / "v.json"), "--runs", "1", "--policy", str(tmp_path / "ckpt"), "-k", "2"]
    for _ in range(2):          # the second run reuses every check and the calibration
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        task = json.loads((tmp_path / "v.json").read_text())["tasks"][0]
        assert task["difficulty"]["label"] == "too hard" and task["difficulty"]["n"] == 2
