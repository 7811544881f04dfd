"""A pool of same-kind Ray actors (sandbox actors, engine replicas) that keeps them alive.

Each slot holds one actor. `acquire`/`release` hand an idle slot to one wave at a time (the
sandbox pool); `route(i)` names a slot without taking it (engine replicas are shared). A
heartbeat pings idle slots every `heartbeat_s`. `replace` starts a new actor in a dead one's
place with the pool's current state (an engine replica's current weights) before it serves;
it is idempotent per death, so two waves that saw the same actor die start one replacement.
After `max_restarts` replacements of one slot the run fails with `ActorFailed`, naming the
actor, its node, its pid and the last lines of its log (RUN/actors/<name>.log).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.errors import PosttrainError


class ActorFailed(PosttrainError):
    """An actor died more often than its slot may be refilled."""


def tail(path: Path | None, n: int = 10) -> str:
    if path is None or not path.is_file():
        return "(no log)"
    return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-n:]).rstrip()


@dataclass
class Slot:
    index: int
    name: str
    actor: object = None
    where: dict = field(default_factory=dict)
    restarts: int = 0
    busy: bool = False
    starting: bool = False    # a replacement is starting: the heartbeat leaves it alone
    wave_s: float = 0.0       # since the last metrics() call
    waves: int = 0


class ActorPool:
    def __init__(self, spawn, n: int, names: str, log_dir: Path | None, max_restarts: int,
                 heartbeat_s: float, start_timeout_s: float):
        self._spawn, self.log_dir, self.max_restarts = spawn, log_dir, max_restarts
        self.start_timeout_s, self.heartbeat_s = start_timeout_s, heartbeat_s
        self.lock = threading.Condition()
        self.state: tuple = ()  # what a new actor starts with (an engine: weights ref, version)
        self.slots = [Slot(i, f"{names}-{i}") for i in range(n)]
        self.generate_s = 0.0
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-{names}")

    def log_path(self, slot: Slot) -> Path | None:
        return self.log_dir / f"{slot.name}.log" if self.log_dir else None

    def launch(self, *state) -> None:
        """Ask for every actor (they start meanwhile: call `ready` next)."""
        self.state = state
        for s in self.slots:
            s.actor = self._spawn(s, *state)

    def ready(self) -> None:
        """Wait until every actor answers, then start the heartbeat."""
        import ray

        for s in self.slots:
            s.where = self._where(s, ray)
        self._heartbeat.start()

    def _where(self, slot: Slot, ray) -> dict:
        try:
            return ray.get(slot.actor.where.remote(), timeout=self.start_timeout_s)
        except Exception as e:
            raise ActorFailed(f"{slot.name} did not start within {self.start_timeout_s:g} s: {e}\n"
                              f"last log lines:\n{tail(self.log_path(slot))}") from e

    def acquire(self) -> Slot:
        with self.lock:
            while True:
                idle = [s for s in self.slots if not s.busy]
                if idle:
                    idle[0].busy = True
                    return idle[0]
                self.lock.wait()

    def release(self, slot: Slot, timing: dict | None = None) -> None:
        with self.lock:
            slot.busy = False
            if timing:
                slot.wave_s += timing["wave_s"]
                slot.waves += 1
                self.generate_s += timing["generate_s"]
            self.lock.notify_all()

    def route(self, key: int) -> tuple[Slot, object, int]:
        """The slot for `key` without taking it, with its actor and restart count now."""
        with self.lock:
            slot = self.slots[key % len(self.slots)]
            return slot, slot.actor, slot.restarts

    def replace(self, slot: Slot, why: BaseException, seen: int | None = None) -> None:
        """A new actor in the dead one's place, started with the pool's current state; a
        replacement that dies while starting is replaced in turn. With `seen` (the restart
        count when the caller took the slot), a slot someone else replaced is left alone."""
        import ray

        while True:
            with self.lock:
                if seen is not None and slot.restarts != seen:
                    return
                if slot.restarts >= self.max_restarts:
                    raise ActorFailed(
                        f"{slot.name} (node {slot.where.get('ip', '?')} {slot.where.get('node', '?')[:12]}, "
                        f"pid {slot.where.get('pid', '?')}) died {slot.restarts + 1} times; last: "
                        f"{type(why).__name__}: {str(why)[:300]}\nlast log lines:\n{tail(self.log_path(slot))}")
                slot.restarts += 1
                seen, slot.starting = slot.restarts, True
                with quiet():
                    ray.kill(slot.actor, no_restart=True)
                slot.actor = self._spawn(slot, *self.state)
            try:
                slot.where = self._where(slot, ray)
                return
            except ActorFailed as e:
                why = e
            finally:
                slot.starting = False

    def publish(self, *state) -> None:
        """Every live actor takes the new state (`update_weights`); a dead one gets it when
        it is replaced."""
        import ray

        with self.lock:
            self.state = state
            actors = [s.actor for s in self.slots]
        for ref in [a.update_weights.remote(*state) for a in actors]:
            with quiet():
                ray.get(ref)

    def _beat(self) -> None:
        import ray

        while not self._closed.wait(self.heartbeat_s):
            with self.lock:
                idle = [(s, s.restarts) for s in self.slots if not s.busy and not s.starting]
                for s, _ in idle:
                    s.busy = True  # nobody takes it while it is checked
            for s, seen in idle:
                try:
                    ray.get(s.actor.ping.remote(), timeout=max(self.heartbeat_s * 5, 10.0))
                except Exception as e:
                    if self._closed.is_set():
                        break
                    with quiet():  # ActorFailed: the next wave on this slot reports it
                        self.replace(s, e, seen)
                finally:
                    self.release(s)

    def metrics(self) -> dict:
        """Per-actor wave seconds and waves since the last call, and restarts so far."""
        out = {}
        with self.lock:
            for s in self.slots:
                out[f"actor_{s.name}_wave_s"] = s.wave_s
                out[f"actor_{s.name}_waves"] = float(s.waves)
                out[f"actor_{s.name}_restarts_total"] = float(s.restarts)
                s.wave_s, s.waves = 0.0, 0
        return out

    def close(self) -> None:
        import ray

        self._closed.set()
        for s in self.slots:
            if s.actor is not None:
                with quiet():
                    ray.kill(s.actor, no_restart=True)


class quiet:
    """Swallow an actor's death (it is handled where it matters: the next call on it)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        return kind is not None and issubclass(kind, Exception)
