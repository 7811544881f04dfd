"""A pool of sandboxes: warm spares, per-domain concurrency quotas, leases, health and reaping.

Paired verbs, as a block manager has: ask `can_acquire(domain)`, then `acquire(domain)`,
and give it back with `release(sandbox)`. A released sandbox is reset (processes killed,
/app /tmp /logs emptied, spec restored), health-checked and kept warm for the next
caller, or closed when the pool has enough spares. `reap()` reclaims leases held past
`lease_s` (a caller that crashed or forgot to release) and sandboxes of dead processes.

With `shared`, a schedule.pool.PriorityPool, each sandbox also holds a slot of that pool
for this pool's `kind` of work, so that several pools (training rollouts, evaluation) in one
process share the slots by priority. A lower kind's slot can be preempted:
`preempted(sandbox)` is its event, and the holder stops the work and releases.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from posttrain.errors import SandboxError
from posttrain.sandbox.base import Sandbox, SandboxSpec
from posttrain.sandbox.factory import create
from posttrain.sandbox.reaper import ReapReport, reap


class SlotPool(Protocol):
    """What a shared pool offers (schedule.pool.PriorityPool; typed here so that this layer
    imports nothing above it). A slot has a `preempted` threading.Event."""

    def acquire(self, kind: str, timeout: float | None = None) -> Any: ...

    def release(self, slot: Any) -> None: ...


@dataclass
class Lease:
    domain: str
    since: float
    pooled: bool          # built from the pool's spec, so it may be reused
    slot: Any = None      # the shared pool's slot, if there is one


class SandboxPool:
    """Warm sandboxes of one spec; `quotas` caps concurrent leases per domain."""

    def __init__(self, spec: SandboxSpec | None = None, backend: str = "bwrap", warm: int = 0,
                 max_total: int = 64, quotas: dict[str, int] | None = None,
                 lease_s: float | None = None, shared: SlotPool | None = None,
                 kind: str = "default"):
        self.shared, self.kind = shared, kind
        self.spec, self.backend = spec or SandboxSpec(), backend
        self.warm, self.max_total, self.quotas, self.lease_s = warm, max_total, quotas or {}, lease_s
        self._idle: list[Sandbox] = []
        self._leases: dict[int, tuple[Sandbox, Lease]] = {}
        self._lock = threading.Lock()
        self._pending: Counter = Counter()
        self._recycling: list[threading.Thread] = []
        self._closed = False
        self.stats = Counter()
        self.last_reap: ReapReport = reap()      # what earlier, crashed runs left behind
        self.fill()

    def fill(self) -> None:
        """Start sandboxes until `warm` are idle (each runs `true` once, so its runner is up)."""
        while True:
            with self._lock:
                if len(self._idle) >= self.warm or self._total() >= self.max_total:
                    return
            sb = create(self.backend, copy.deepcopy(self.spec))
            sb.healthy()
            with self._lock:
                self._idle.append(sb)

    def _total(self) -> int:
        return len(self._idle) + len(self._leases)

    def in_use(self, domain: str | None = None) -> int:
        with self._lock:
            return sum(1 for _, lease in self._leases.values()
                       if domain is None or lease.domain == domain)

    def _can(self, domain: str) -> bool:
        used = self._pending[domain] + sum(
            1 for _, lease in self._leases.values() if lease.domain == domain)
        quota = self.quotas.get(domain)
        busy = len(self._leases) + sum(self._pending.values())
        return (quota is None or used < quota) and busy < self.max_total

    def can_acquire(self, domain: str = "default") -> bool:
        """Whether acquire(domain) would succeed now (domain quota and pool size)."""
        with self._lock:
            return self._can(domain)

    def acquire(self, domain: str = "default", spec: SandboxSpec | None = None) -> Sandbox:
        """A healthy sandbox for `domain`; a warm one when `spec` is the pool's (or None)."""
        with self._lock:
            if not self._can(domain):
                raise SandboxError(f"sandbox quota for domain {domain!r} is used up; "
                                   "ask can_acquire() first")
            self._pending[domain] += 1             # reserved until the sandbox is ready
        slot = None
        try:
            slot = self.shared.acquire(self.kind) if self.shared is not None else None
            pooled = spec is None or spec == self.spec
            sb = self._take_idle() if pooled else None
            if sb is None:
                sb = create(self.backend, copy.deepcopy(spec or self.spec))
                self.stats["created"] += 1
            else:
                self.stats["reused"] += 1
            with self._lock:
                self._leases[id(sb)] = (sb, Lease(domain, time.monotonic(), pooled, slot))
            slot = None
            return sb
        finally:
            if slot is not None:        # the sandbox could not be made: the slot goes back
                self.shared.release(slot)
            with self._lock:
                self._pending[domain] -= 1

    def _take_idle(self) -> Sandbox | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sb = self._idle.pop()
            if sb.healthy():
                return sb
            self.stats["unhealthy"] += 1
            sb.close()

    def release(self, sandbox: Sandbox, reuse: bool = True, wait: bool = True) -> None:
        """Give a sandbox back: reset and kept warm when possible, else closed. With
        wait=False the reset (tens of ms) runs on a background thread; the quota slot is
        free at once, the sandbox joins the idle ones when its reset is done."""
        with self._lock:
            entry = self._leases.pop(id(sandbox), None)
        if entry is None:
            raise SandboxError("release() of a sandbox this pool did not lend (or already reaped)")
        preempted = entry[1].slot is not None and entry[1].slot.preempted.is_set()
        self._release_slot(entry[1])
        keep = reuse and entry[1].pooled and not preempted   # a preempted one was closed
        if wait:
            self._recycle(sandbox, keep)
            return
        t = threading.Thread(target=self._recycle, args=(sandbox, keep), daemon=True)
        with self._lock:
            self._recycling = [r for r in self._recycling if r.is_alive()] + [t]
        t.start()

    def preempted(self, sandbox: Sandbox) -> threading.Event | None:
        """The event set when higher-priority work takes this sandbox's shared slot."""
        with self._lock:
            entry = self._leases.get(id(sandbox))
        return entry[1].slot.preempted if entry and entry[1].slot else None

    def _release_slot(self, lease: Lease) -> None:
        if lease.slot is not None:
            self.shared.release(lease.slot)
            lease.slot = None

    def _recycle(self, sandbox: Sandbox, keep: bool) -> None:
        with self._lock:
            keep = keep and len(self._idle) < self.warm
        if keep:
            try:
                sandbox.spec = copy.deepcopy(self.spec)
                sandbox.reset()
                keep = sandbox.healthy()
            except Exception:
                keep = False
        with self._lock:
            if keep and not self._closed:
                self._idle.append(sandbox)
                return
        sandbox.close()

    def reap(self) -> ReapReport:
        """Close leases older than lease_s and reclaim sandboxes of dead processes."""
        now = time.monotonic()
        with self._lock:
            stale = [sb for sb, lease in self._leases.values()
                     if self.lease_s is not None and now - lease.since > self.lease_s]
            for sb in stale:
                self._release_slot(self._leases.pop(id(sb))[1])
        for sb in stale:
            sb.close()
        self.stats["leases_reaped"] += len(stale)
        report = reap()
        report.sandboxes += [getattr(sb, "id", "?") for sb in stale]
        return report

    def health(self) -> dict:
        """Counts per state and per domain, and whether every idle sandbox answers."""
        with self._lock:
            idle = list(self._idle)
            domains = Counter(lease.domain for _, lease in self._leases.values())
        return {"idle": len(idle), "in_use": sum(domains.values()), "by_domain": dict(domains),
                "idle_healthy": all(sb.healthy() for sb in idle), **self.stats}

    def close(self) -> None:
        """Close every sandbox, idle, lent or being reset."""
        with self._lock:
            self._closed = True
            recycling = list(self._recycling)
        for t in recycling:
            t.join()
        with self._lock:
            sandboxes = self._idle + [sb for sb, _ in self._leases.values()]
            for _, lease in self._leases.values():
                self._release_slot(lease)
            self._idle, self._leases = [], {}
        for sb in sandboxes:
            sb.close()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
