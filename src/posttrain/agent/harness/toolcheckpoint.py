"""Per-turn checkpoints of the tool-calling agent (eval's tools protocol).

After every turn the agent's state (messages, per-turn metrics, token counts, verdicts, how much
of its time it has used) and a snapshot of its sandbox go to agent/checkpoint.py's EpisodeStore,
as the text protocol's episodes do. A trial started again after a kill restores both and goes on
at the next turn. Each turn asks the endpoint with its own seed (the attempt's seed and the turn),
so with a deterministic endpoint the resumed trial equals an uninterrupted one. What is not
brought back: processes the agent started, and an endpoint's own state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from posttrain.agent.checkpoint import EpisodeStore

SAVED = ("messages", "turns", "prompt_tokens", "completion_tokens", "model_s", "sandbox_s", "n_malformed",
         "approvals")


@dataclass
class ToolCheckpoints:
    """One trial's checkpoints: `key` (task id, attempt, 0) in `store`."""

    store: EpisodeStore
    key: tuple[str, int, int]

    def resume(self, run, sandbox, timeout_s: float) -> tuple[int, int]:
        """Restore the last checkpoint into `run` and `sandbox`: (next turn, malformed replies in a
        row); (0, 0) when there is none."""
        saved = self.store.load(self.key)
        if saved is None:
            return 0, 0
        state, snapshot = saved
        t0 = time.perf_counter()
        self.store.restore(snapshot, sandbox)
        for name in SAVED:
            setattr(run, name, state[name])
        run.deadline = time.perf_counter() + timeout_s - state["agent_s"]
        run.checkpoints = state["checkpoints"] + [_timed("restore", state["turn"], t0)]
        return state["turn"], state["in_a_row"]

    def save(self, run, sandbox, next_turn: int, in_a_row: int, timeout_s: float) -> None:
        t0 = time.perf_counter()
        state = {name: getattr(run, name) for name in SAVED} | {
            "turn": next_turn, "in_a_row": in_a_row, "checkpoints": run.checkpoints,
            "agent_s": timeout_s - (run.deadline - t0)}
        if self.store.save(self.key, state, sandbox):
            run.checkpoints.append(_timed("snapshot", next_turn, t0))


def _timed(kind: str, turn: int, t0: float) -> dict:
    return {"kind": kind, "turn": turn, "ms": round((time.perf_counter() - t0) * 1000, 2)}
