"""A run on tasks that declare tools stops early, with one line, when the model writes no call."""

from __future__ import annotations

from collections import Counter

from posttrain.errors import PosttrainError


class ToolUseWatch:
    """Stops a run on tasks that declare tools when its first NO_CALL_STEPS steps made no tool
    call at all: the model is not writing calls the harness can read, and RL cannot start."""

    NO_CALL_STEPS = 3

    def __init__(self, env):
        self.on = env.uses_tools
        self.calls, self.failures = 0.0, Counter()

    def check(self, step: int, stats: dict) -> None:
        if not self.on or step >= self.NO_CALL_STEPS:
            return
        self.calls += stats.get("tool_calls_mean", 0.0)
        self.failures.update({k[len("parse_"):-len("_mean")]: v for k, v in stats.items()
                              if k.startswith("parse_") and k.endswith("_mean")})
        if step + 1 == self.NO_CALL_STEPS and self.calls == 0:
            top = ", ".join(f"{k} {v:.1f}" for k, v in self.failures.most_common(3)) or "none"
            raise PosttrainError(
                f"no tool call in the first {self.NO_CALL_STEPS} steps (parse failures per "
                f"episode: {top}): the model does not write <tool_call> blocks the harness can "
                "read; warm-start it on the tasks' oracle calls (policy.hf_sft_steps)")
