"""Rollout-worker actors and the pool that keeps them alive.

A `RolloutWorker` actor holds the env and its own engine replica (a copy of the policy);
it runs waves and takes weight updates between generate calls (two actor threads: a
publish lands while a wave runs, as in one process). It writes its log to
RUN/actors/<name>.log. The `WorkerPool` hands idle workers to the pipeline's threads,
pings idle ones every `heartbeat_s`, and replaces a dead one in the same placement bundle
with the current weights before it serves. After `max_restarts` replacements of one slot
the run fails with `ActorFailed`, naming the actor, its node and its last log lines.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.errors import PosttrainError


class ActorFailed(PosttrainError):
    """An actor died more often than its slot may be refilled."""


def _tail(path: Path | None, n: int = 10) -> str:
    if path is None or not path.is_file():
        return "(no log)"
    return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-n:]).rstrip()


class RolloutWorker:
    """Actor body: env + engine replica. Built with ray.remote(...) by the pool."""

    def __init__(self, name: str, env, model, tokenizer, weights, version: int, log_path: str | None):
        import torch

        from posttrain.engine.local import LocalEngine
        from posttrain.rollout.weights import LockedEngine

        torch.set_num_threads(1)
        self.name, self.env = name, env
        self.log = logging.getLogger(f"posttrain.actor.{name}")
        if log_path:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(log_path)
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            self.log.addHandler(handler)
            self.log.setLevel(logging.INFO)
        self.engine = LockedEngine(LocalEngine(model, tokenizer))
        self.engine.publish_state(weights, version)
        self.log.info("%s up on pid %d with weights v%d", name, os.getpid(), version)

    def where(self) -> dict:
        import ray

        ctx = ray.get_runtime_context()
        return {"node": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def ping(self) -> int:
        return self.engine.policy_version

    def run(self, jobs) -> tuple[list, dict]:
        t0, gen0 = time.perf_counter(), self.engine.generate_s
        out = self.env.run(jobs, self.engine)
        wall = time.perf_counter() - t0
        self.log.info("wave %s: %.3f s", [j.uid for j in jobs], wall)
        return out, {"wave_s": wall, "generate_s": self.engine.generate_s - gen0}

    def update_weights(self, weights, version: int) -> None:
        self.engine.publish_state(weights, version)
        self.log.info("weights v%d", version)


@dataclass
class Slot:
    index: int
    name: str
    actor: object = None
    where: dict = field(default_factory=dict)
    restarts: int = 0
    busy: bool = False
    wave_s: float = 0.0       # since the last metrics() call
    waves: int = 0


class WorkerPool:
    def __init__(self, spawn, n: int, names: str, log_dir: Path | None, max_restarts: int,
                 heartbeat_s: float, start_timeout_s: float):
        self._spawn, self.log_dir, self.max_restarts = spawn, log_dir, max_restarts
        self.start_timeout_s = start_timeout_s
        self.lock = threading.Condition()
        self.weights = None  # (object ref of the current state dict, version)
        self.slots = [Slot(i, f"{names}-{i}") for i in range(n)]
        self.generate_s = 0.0
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True,
                                           name="heartbeat")

    def log_path(self, slot: Slot) -> Path | None:
        return self.log_dir / f"{slot.name}.log" if self.log_dir else None

    def start(self, weights_ref, version: int) -> None:
        import ray

        self.weights = (weights_ref, version)
        for s in self.slots:
            s.actor = self._spawn(s, weights_ref, version)
        for s in self.slots:
            s.where = self._where(s, ray)
        self._heartbeat.start()

    def _where(self, slot: Slot, ray) -> dict:
        try:
            return ray.get(slot.actor.where.remote(), timeout=self.start_timeout_s)
        except Exception as e:
            raise ActorFailed(f"{slot.name} did not start within {self.start_timeout_s:g} s: {e}\n"
                              f"last log lines:\n{_tail(self.log_path(slot))}") from e

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

    def replace(self, slot: Slot, why: BaseException) -> None:
        """A new actor in the dead one's place, with the current weights before it serves;
        a replacement that dies while starting is replaced in turn."""
        import ray

        while True:
            with self.lock:
                if slot.restarts >= self.max_restarts:
                    raise ActorFailed(
                        f"{slot.name} (node {slot.where.get('ip', '?')} {slot.where.get('node', '?')[:12]}, "
                        f"pid {slot.where.get('pid', '?')}) died {slot.restarts + 1} times; last: "
                        f"{type(why).__name__}: {str(why)[:300]}\nlast log lines:\n{_tail(self.log_path(slot))}")
                slot.restarts += 1
                with _quiet():
                    ray.kill(slot.actor, no_restart=True)
                slot.actor = self._spawn(slot, *self.weights)
            try:
                slot.where = self._where(slot, ray)
                return
            except ActorFailed as e:
                why = e

    def publish(self, weights_ref, version: int) -> None:
        """Every live actor takes the weights; a dead one gets them when it is replaced."""
        import ray

        with self.lock:
            self.weights = (weights_ref, version)
            actors = [s.actor for s in self.slots]
        for ref in [a.update_weights.remote(weights_ref, version) for a in actors]:
            with _quiet():
                ray.get(ref)

    def _beat(self, every_s: float) -> None:
        import ray

        while not self._closed.wait(every_s):
            with self.lock:
                idle = [s for s in self.slots if not s.busy]
                for s in idle:
                    s.busy = True  # nobody takes it while it is checked
            for s in idle:
                try:
                    ray.get(s.actor.ping.remote(), timeout=max(every_s * 5, 5.0))
                except Exception as e:
                    if self._closed.is_set():
                        break
                    try:
                        self.replace(s, e)
                    except ActorFailed:
                        pass  # the next wave on this slot reports it
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
                with _quiet():
                    ray.kill(s.actor, no_restart=True)


class _quiet:
    """Swallow an actor's death (it is handled where it matters: the next call on it)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        return kind is not None and issubclass(kind, Exception)
