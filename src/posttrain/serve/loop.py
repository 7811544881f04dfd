"""EngineLoop: one thread owns the engine and steps it; asyncio handlers submit and stream.

Handlers call `submit` (returns a Handle whose asyncio queue receives per-step token deltas, or
for a request that does not stream one delta per choice when it finishes: a waiting handler
has nothing to do with the steps between, and each post wakes the event loop's thread, which
takes the GIL from the stepping one) and `abort` (a client went away). The thread drains its inbox, steps the engine while there
is work, and posts deltas back to the event loop thread-safely. Continuous batching falls
out: requests that arrive mid-generation join the next step.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import traceback
from dataclasses import dataclass, field

import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.engine import PagedEngine


@dataclass
class Delta:
    """New tokens of choice `index` since the last delta; `finish_reason` set on the last one.

    `error` fails the request: status 400 if the engine refused it, 500 if a step failed."""

    index: int
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None = None
    error: str | None = None
    status: int = 500
    top_logprobs: list[dict[int, float]] = field(default_factory=list)


@dataclass(eq=False)
class Handle:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    prompts: list[list[int]]
    params: SamplingParams
    stream: bool = True  # post every step's new tokens (else only each choice's whole output, once)
    seqs: list = field(default_factory=list)
    sent: list[int] = field(default_factory=list)


class EngineLoop:
    def __init__(self, engine: PagedEngine):
        self.engine = engine
        self.inbox: queue.Queue = queue.Queue()
        self.active: list[Handle] = []
        self.wake = threading.Event()
        self.stopping = False
        self.errors = 0
        self.thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()
        self.thread.join(timeout=10)

    def submit(self, prompts: list[list[int]], params: SamplingParams, stream: bool = True) -> Handle:
        """Queue a request (already checked with engine.check_request) from the event loop."""
        handle = Handle(asyncio.get_running_loop(), asyncio.Queue(), prompts, params, stream)
        self.inbox.put(("add", handle))
        self.wake.set()
        return handle

    def abort(self, handle: Handle) -> None:
        """Drop a request's sequences (its client went away); safe to call more than once."""
        self.inbox.put(("abort", handle))
        self.wake.set()

    def _run(self) -> None:
        with torch.inference_mode():
            while not self.stopping:
                self._drain()
                if not self.engine.scheduler.has_work():
                    self.wake.wait(timeout=0.5)
                    self.wake.clear()
                    continue
                try:
                    with self.engine.lock:
                        self.engine.step()
                except Exception:  # keep serving: fail the requests in flight, not the server
                    self._fail_all(traceback.format_exc(limit=3))
                    continue
                self._publish()

    def _drain(self) -> None:
        while True:
            try:
                kind, handle = self.inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                try:
                    with self.engine.lock:
                        handle.seqs = self.engine.add(handle.prompts, handle.params)
                except ValueError as e:
                    self._post(handle, Delta(0, [], [], "error", error=str(e), status=400))
                    continue
                handle.sent = [0] * len(handle.seqs)
                self.active.append(handle)
            elif handle in self.active:
                with self.engine.lock:
                    self.engine.abort(handle.seqs)
                self.active.remove(handle)

    def _publish(self) -> None:
        for handle in list(self.active):
            for i, seq in enumerate(handle.seqs):
                out = seq.output
                if handle.sent[i] < 0:  # already reported finished
                    continue
                if seq.finished or (handle.stream and len(out) > handle.sent[i]):
                    at = handle.sent[i]
                    delta = Delta(i, out[at:], seq.logprobs[at:], seq.finish_reason, top_logprobs=seq.top_logprobs[at:])
                    handle.sent[i] = -1 if seq.finished else len(out)
                    self._post(handle, delta)
            if all(s.finished for s in handle.seqs):
                self.active.remove(handle)

    def _fail_all(self, message: str) -> None:
        self.errors += 1
        for handle in self.active:
            with self.engine.lock:
                self.engine.abort(handle.seqs)
            self._post(handle, Delta(0, [], [], "error", error=message.strip().splitlines()[-1]))
        self.active.clear()

    @staticmethod
    def _post(handle: Handle, delta: Delta) -> None:
        handle.loop.call_soon_threadsafe(handle.queue.put_nowait, delta)
