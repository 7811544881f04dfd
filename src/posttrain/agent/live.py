"""One episode while it runs, and how it ends: what the built-in loop (agent/loop.py) and an
agent program's runner (agent/byo/) share. `finish` verifies it (a fault is never a reward),
closes its sandbox and drops its checkpoint."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.config import AgentConfig
from posttrain.agent.context import KeepAll
from posttrain.agent.harness import Harness
from posttrain.agent.retry import FaultClass, with_retries
from posttrain.agent.trial import verify
from posttrain.sandbox import Sandbox
from posttrain.tasks import Task
from posttrain.types import Episode, Step


@dataclass
class Live:
    task: Task
    episode: Episode
    policy: KeepAll
    harness: Harness | None = None
    sandbox: Sandbox | None = None
    started: float = 0.0
    done: bool = False
    turn_ids: list[list[int]] = field(default_factory=list)  # each finished turn's ids (History)
    reply_start: int = 0
    first_turn: int = 0         # > 0: resumed from a checkpoint, at this turn
    slot: int = 0               # among the call's episodes of the same task and group (a GRPO group)

    @property
    def key(self) -> tuple[str, int, int]:
        return self.task.id, self.episode.group_id, self.slot

    @property
    def stream(self) -> int:
        """This episode's own sampling stream: the same in whatever batch it runs or resumes."""
        digest = hashlib.sha256(repr(self.key).encode()).digest()
        return int.from_bytes(digest[:4], "big") >> 1


def fail(live: Live, e: BaseException) -> None:
    live.episode.status, live.episode.error, live.done = "infra_error", str(e), True


def finish(live: Live, store: EpisodeStore | None, keep: bool) -> None:
    ep = live.episode
    try:
        if live.sandbox is None or ep.status == "infra_error":  # a fault is never a reward
            return
        t0 = time.time()
        verdict = verify(live.task, live.sandbox)
        ep.timings["verify_s"] = time.time() - t0
        ep.steps.append(Step("verifier", len(ep.turns), t0, ep.timings["verify_s"], {
            "exit_code": verdict.result.exit_code if verdict.result else None,
            "reward": verdict.reward, "status": verdict.status}))
        ep.reward, ep.reward_details = verdict.reward, verdict.details
        if verdict.status != "ok":
            ep.status, ep.error = verdict.status, verdict.error
    except Exception as e:
        ep.status, ep.error, ep.reward = "infra_error", str(e), 0.0
    finally:
        if live.sandbox is not None:
            live.sandbox.close()
        if store is not None and not keep:   # the episode is over: its result is the caller's
            store.drop(live.key)


def retried(fn, kind: FaultClass, lives: list[Live], cfg: AgentConfig):
    """fn() with agent/retry.py's backoff, each retry counted on the episodes it holds up."""
    def count():
        for lv in lives:
            lv.episode.retries += 1
    return with_retries(fn, kind, cfg.retries, cfg.retry_backoff_s, cfg.retry_backoff_max_s, count)
