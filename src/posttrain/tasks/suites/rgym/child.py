"""The trainer's side of the scoring child (worker.py): start it, send a reply, wait for its
score with a timeout, kill and restart it when it hangs or dies.

One child per process, started at the first score and shared by its threads (one request at a
time). It gets no environment variables (no tokens or keys to read), the root directory as its
working directory, and writes its results on a pipe of its own, never stdout.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time

from posttrain.errors import PosttrainError

WORKER = "posttrain.tasks.suites.rgym.worker"
START_TIMEOUT_S = 120.0      # importing reasoning-gym and sympy on a busy host
REPLY_TIMEOUT_S = 10.0       # one reply's scoring; past it the child is killed, the reward is 0
REPLY_CPU_S = 20             # the child's own cap per reply (it outlives a killed parent no longer)
MAX_LINE = 1 << 20


class ScoringChild:
    """One worker process and the pipes to it."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", WORKER, str(write_fd)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write_fd,),
                cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, text=True)
        finally:
            os.close(write_fd)
        self.results = read_fd
        self.pending = b""
        self.ended = False       # the result pipe closed: the child is exiting by itself
        first = self.read(START_TIMEOUT_S)
        if first is None or "error" in first:
            self.close()
            why = first["error"] if first else f"it did not start within {START_TIMEOUT_S:g}s"
            raise PosttrainError(f"reasoning-gym scoring child failed: {why} (pip install -c "
                                 "constraints.txt -e '.[reasoning-gym]')")

    def score(self, request: dict) -> dict | None:
        """The child's answer to one request, or None when it timed out or died (then closed)."""
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            return None
        answer = self.read(REPLY_TIMEOUT_S)
        if answer is None:
            self.close()
        return answer

    def read(self, timeout_s: float) -> dict | None:
        """The next JSON line from the result pipe; None on timeout, EOF or an overlong line."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or len(self.pending) > MAX_LINE:
                return None
            if not select.select([self.results], [], [], left)[0]:
                return None
            chunk = os.read(self.results, 65536)
            if not chunk:
                self.ended = True
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Kill the child unless it is already exiting (then wait for it)."""
        if self.ended:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self.proc.stdin.close()
        except OSError:          # its buffered request could not be flushed into a dead child
            pass
        try:
            os.close(self.results)
        except OSError:
            pass


class SharedChild:
    """The process's one scoring child: started when first needed, again after a timeout or
    a crash, and again in a forked process (a fork does not own its parent's pipes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.child: ScoringChild | None = None
        self.owner = 0
        self.sent = 0            # request ids: a result line must carry its request's

    def score(self, request: dict) -> dict:
        """{"score", "refused"} for a request; {"score": 0, "timeout": True} when the child
        hung or died on it; {"score": 0, "refused": [...]} when a line with another id came
        back (the child is replaced). A request the child cannot serve is a PosttrainError."""
        with self.lock:
            if self.child is None or self.owner != os.getpid() or not self.child.alive():
                self.child, self.owner = ScoringChild(), os.getpid()
            self.sent += 1
            answer = self.child.score({**request, "id": self.sent, "cpu_s": REPLY_CPU_S})
            if answer is None:
                self.child = None
                return {"score": 0.0, "refused": [], "timeout": True}
            if "error" not in answer and answer.get("id") != self.sent:
                self.child.close()
                self.child = None
                return {"score": 0.0, "refused": ["a result line with another id"]}
        if "error" in answer:
            raise PosttrainError(f"reasoning-gym dataset {request.get('dataset')!r}: {answer['error']}")
        return answer

    def close(self) -> None:
        with self.lock:
            if self.child is not None and self.owner == os.getpid():
                self.child.close()
            self.child = None


CHILD = SharedChild()
atexit.register(CHILD.close)
