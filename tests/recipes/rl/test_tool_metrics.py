"""What RL and eval report about tool use: calls and parse failures per episode, the held-out
pass@1 paired by task, and the early stop of a run whose model writes no tool call."""

from pathlib import Path

import pytest

from posttrain.agent.stats import tool_stats
from posttrain.errors import PosttrainError
from posttrain.recipes.rl.heldout import heldout_gain
from posttrain.recipes.rl.tool_watch import ToolUseWatch
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.task import Task
from posttrain.types import Episode, Turn


def _episode(*turns: Turn) -> Episode:
    ep = Episode("t", 0)
    ep.turns = list(turns)
    return ep


def test_tool_stats_per_episode_by_kind():
    a = _episode(Turn("kv_get {}", "tool", "1"), Turn("x", "bad_json", "error"),
                 Turn("kv_set {}", "tool", "ok", failures=["unknown_tool"]))
    b = _episode(Turn("hi", "no_tool_call", "error"))
    assert tool_stats([a, b]) == {"tool_calls_mean": 1.0, "parse_failures_mean": 1.5,
                                  "parse_bad_json_mean": 0.5, "parse_no_tool_call_mean": 0.5,
                                  "parse_unknown_tool_mean": 0.5}
    assert tool_stats([_episode(Turn("ls", "bash", "a"))]) == {}      # nothing of tools


def test_heldout_gain_pairs_pass_at_1_by_task():
    before = {"pass_at_1": 0.25, "scores": {"a": [0.0, 0.0], "b": [1.0, 0.0]}}
    after = {"pass_at_1": 0.75, "scores": {"a": [1.0, 0.0], "b": [1.0, 1.0]}}
    g = heldout_gain(before, after)
    assert g["heldout_before"] == 0.25 and g["heldout_after"] == 0.75
    assert g["paired_diff"] == pytest.approx(0.5)


def _Env(tools: bool):
    from posttrain.agent.config import AgentConfig
    from posttrain.rollout.envs import SandboxEnv

    files = {"tools.json": '{"command": "true", "tools": []}'} if tools else {}
    return SandboxEnv([Task("t", "x", TaskConfig(), Path("/nonexistent-task"), files)], None,
                      AgentConfig(), 1)


def test_a_run_that_writes_no_tool_call_stops_after_three_steps():
    watch = ToolUseWatch(_Env(tools=True))
    watch.check(0, {"parse_no_tool_call_mean": 2.0})
    watch.check(1, {"parse_bad_json_mean": 1.0})
    with pytest.raises(PosttrainError, match="no tool call in the first 3 steps.*no_tool_call 2.0"):
        watch.check(2, {})
    calls = ToolUseWatch(_Env(tools=True))
    for step in range(3):
        calls.check(step, {"tool_calls_mean": 0.1 if step == 2 else 0.0})
    text = ToolUseWatch(_Env(tools=False))                 # text-protocol tasks: never stopped
    for step in range(3):
        text.check(step, {})
