"""ReplicaSet: several engine servers behind the engine interface, with prefix-affine routing,
failover and versioned weight updates that reach every replica before the version is used.

A replica is *live* while it answers and holds the current weights. One that fails a request
at the transport level (dead, unreachable) or fails a weight update (its weights may be mixed)
is taken out; the request runs again on another live replica (for an episode that is the turn
in flight: the earlier turns stand, sampled on weights of their own recorded version). A
replica that was taken out rejoins at the next weight update, and only after it has loaded
that update: `revive(i)` restarts its server (the launcher's job), `ready(i)` says when the
restarted server answers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from posttrain.engine.base import Engine, SamplingParams
from posttrain.engine.clients.vllm import VLLMEngine
from posttrain.engine.clients.weight_files import staged_weights
from posttrain.engine.fleet.routing import AffinityRouter
from posttrain.errors import EngineError
from posttrain.types import Completion


class ReplicaSet(Engine):
    concurrent = True
    updates_while_generating = True  # each replica orders its own update against its calls

    def __init__(self, replicas: list[VLLMEngine], router: AffinityRouter | None = None,
                 revive: Callable[[int], None] | None = None, ready: Callable[[int], bool] | None = None,
                 reconnect: Callable[[int], VLLMEngine] | None = None, log_path: Path | None = None):
        self.replicas = list(replicas)
        self.router = router or AffinityRouter()
        self._revive, self._ready, self._reconnect = revive, ready, reconnect
        self.live = set(range(len(replicas)))
        self.policy_version = 0
        self.events: list[dict] = []  # take-outs and rejoins, also appended to log_path
        self.log_path = log_path
        self.served_calls = [0] * len(replicas)
        self.last_sync: dict = {}
        self._lock = threading.Lock()

    def _pick(self, prompt: list[int]) -> int:
        with self._lock:
            load = {i: self.replicas[i].outstanding_tokens for i in self.live}
            if not load:
                raise EngineError("no live engine replica: every one failed or was taken out")
            return self.router.choose(prompt, load)

    def take_out(self, i: int, reason: str) -> None:
        with self._lock:
            if i not in self.live:
                return
            self.live.discard(i)
            self.router.forget(i)
            self._event({"event": "take_out", "replica": i, "reason": reason[:300],
                         "version": self.policy_version})
        if self._revive is not None:
            self._revive(i)

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """All prompts of one call (a GRPO group) go to one replica."""
        while True:
            i = self._pick(prompts[0])
            replica = self.replicas[i]
            try:
                out = replica.generate(prompts, params)
                self.served_calls[i] += 1
                return out
            except EngineError as e:
                if replica.healthy and replica.alive():
                    raise  # the server answered: the request itself failed; say so
                self.take_out(i, f"request failed: {e}")

    def update_weights(self, state_dict: dict, version: int) -> None:
        """Stage the weights once, load them into every live replica, then into every revived
        one (which rejoins only then); a replica whose load fails is taken out."""
        t0 = time.perf_counter()
        with staged_weights(state_dict) as (directory, nbytes):
            staged_s = time.perf_counter() - t0
            loads = {}
            for i in sorted(self.live):
                try:
                    loads[i] = self.replicas[i].load_weights_from(directory, version)
                except EngineError as e:
                    self.take_out(i, str(e))
            self._rejoin(directory, version, loads)
        if not self.live:
            raise EngineError(f"no engine replica holds weights version {version}")
        self.policy_version = version
        self.last_sync = {"version": version, "bytes": nbytes, "stage_s": staged_s,
                          "load_s": loads, "total_s": time.perf_counter() - t0}

    def _rejoin(self, directory, version: int, loads: dict) -> None:
        for i in range(len(self.replicas)):
            if i in self.live or self._ready is None or not self._ready(i):
                continue
            try:
                if self._reconnect is not None:
                    self.replicas[i] = self._reconnect(i)
                loads[i] = self.replicas[i].load_weights_from(directory, version)
            except EngineError:
                continue  # stays out; tried again at the next update
            with self._lock:
                self.live.add(i)
                self._event({"event": "rejoin", "replica": i, "version": version})

    def _event(self, event: dict) -> None:
        """Record under self._lock (or before any thread can race)."""
        event["t"] = time.time()
        self.events.append(event)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(event) + "\n")

    def close(self) -> None:
        with self._lock:
            self._event({"event": "close", "live": sorted(self.live), "served_calls": self.served_calls,
                         "version": self.policy_version})
        for r in self.replicas:
            r.close()
