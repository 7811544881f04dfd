"""ProcessEngine: the embedded engine in a child process, so generation runs on one core
while the trainer computes on another (threads would contend for the GIL).

Weights travel through a shared-memory file: `update_weights` copies the trainer's
tensors into it under an exclusive flock and bumps the version in its header; the child
copies them into its private model (under a shared flock) at the start of its next
generate call. A generate call in flight finishes on the weights it started with, and
every Completion carries the version it was sampled with, so partial rollouts work as
with the in-process engine. The child is a plain `python -m` process: it does not
re-import the caller's main module, and it exits when the parent goes away.

`bind(fn)` sends a picklable function to the child once; `call(handle, *args)` runs
`fn(*args, engine)` there, beside the engine, and returns its result. A rollout that is all
CPU work besides generation (tokenize, sample, decode, score) then runs wholly in the child,
off the trainer's interpreter and its GIL.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

import torch

from posttrain.engine.base import Engine, SamplingParams
from posttrain.errors import PosttrainError
from posttrain.types import Completion

_HEADER = 64  # bytes before the weights: the int64 version, then padding for alignment


class EngineProcessError(PosttrainError):
    """The engine's child process failed or died."""


def _nbytes(dtype: torch.dtype, shape: tuple) -> int:
    return torch.Size(shape).numel() * torch.empty(0, dtype=dtype).element_size()


def _layout(state_dict: dict) -> dict[str, tuple[int, torch.dtype, tuple]]:
    """name -> (byte offset, dtype, shape), each tensor 64-byte aligned after the header."""
    out, offset = {}, _HEADER
    for name, t in state_dict.items():
        out[name] = (offset, t.dtype, tuple(t.shape))
        offset += -(-_nbytes(t.dtype, t.shape) // 64) * 64
    return out


class SharedWeights:
    """A versioned set of tensors in one memory-mapped file, guarded by flock."""

    def __init__(self, path: Path, layout: dict, create: bool = False):
        size = max([_HEADER] + [off + _nbytes(dt, shape) for off, dt, shape in layout.values()])
        self.layout = layout
        self._fd = os.open(path, os.O_RDWR)
        if create:
            os.ftruncate(self._fd, size)
        raw = torch.from_file(str(path), shared=True, size=size, dtype=torch.uint8)
        self.version = raw[:8].view(torch.int64)
        self.tensors = {n: raw[off:off + _nbytes(dt, s)].view(dt).view(s)
                        for n, (off, dt, s) in layout.items()}

    def write(self, state_dict: dict, version: int) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            with torch.no_grad():  # one call: the copies run without the GIL
                torch._foreach_copy_(list(self.tensors.values()), [state_dict[n] for n in self.tensors])
            self.version[0] = version
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def read_into(self, engine) -> None:
        """Copy the weights into the engine if they are newer than what it holds."""
        if int(self.version[0]) == engine.policy_version:
            return
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            engine.update_weights(self.tensors, int(self.version[0]))
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


class ProcessEngine(Engine):
    """`ProcessEngine(model, tokenizer)`: a LocalEngine over a copy of `model` in a child process.

    Thread-safe; callers are served one request at a time. Weight updates never wait for
    a generate call in flight (`updates_while_generating`)."""

    updates_while_generating = True

    def __init__(self, model, tokenizer, engine_config=None, threads: int = 1):
        state = {k: v.detach() for k, v in model.state_dict().items()}
        fd, path = tempfile.mkstemp(prefix="posttrain-weights-", dir=_shm_dir())
        os.close(fd)
        try:
            self._shared = SharedWeights(Path(path), _layout(state), create=True)
            self._shared.write(state, 0)
            self._conn, child = Pipe()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "posttrain.engine.process", str(child.fileno())],
                pass_fds=(child.fileno(),), env={**os.environ, "PYTHONWARNINGS": "ignore"})
            child.close()
            self._conn.send((path, self._shared.layout, model.config, tokenizer, engine_config, threads))
            self._expect_ok("start")
        finally:
            os.unlink(path)  # both processes hold it open; nothing is left behind on a crash
        self._rpc = threading.Lock()
        self.tokenizer = tokenizer

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def policy_version(self) -> int:
        return int(self._shared.version[0])

    def _expect_ok(self, what: str):
        try:
            status, payload = self._conn.recv()
        except (EOFError, ConnectionResetError):
            raise EngineProcessError(
                f"the engine process died during {what} (exit code {self._proc.poll()})") from None
        if status != "ok":
            raise EngineProcessError(f"engine process, {what}: {payload}")
        return payload

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return self._request("generate", prompts, params)

    def bind(self, fn) -> int:
        """Send `fn` (picklable) to the child; returns the handle that `call` takes."""
        return self._request("bind", fn)

    def call(self, handle: int, *args) -> tuple[object, float]:
        """`fn(*args, engine)` in the child, on the newest weights at each of its generate
        calls; returns (its result, seconds spent generating)."""
        return self._request("call", handle, args)

    def _request(self, what: str, *payload):
        with self._rpc:
            try:
                self._conn.send((what, *payload))
            except (BrokenPipeError, ConnectionResetError):
                raise EngineProcessError(
                    f"the engine process died (exit code {self._proc.poll()})") from None
            except (pickle.PicklingError, TypeError, AttributeError) as e:
                raise EngineProcessError(f"{what}: cannot send {type(e).__name__}: {e}") from None
            return self._expect_ok(what)

    def update_weights(self, state_dict: dict, version: int) -> None:
        self._shared.write(state_dict, version)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._conn.send(("close",))
                self._proc.wait(timeout=5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._conn.close()
        self._shared.close()

    def __enter__(self) -> ProcessEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _shm_dir() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class _NewestWeights(Engine):
    """The child's engine as bound functions see it: each generate call first takes the
    newest published weights (so a reply sampled in chunks continues across an update)."""

    def __init__(self, engine, shared: SharedWeights):
        self.engine, self.shared, self.generate_s = engine, shared, 0.0

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        self.shared.read_into(self.engine)
        t0 = time.perf_counter()
        try:
            return self.engine.generate(prompts, params)
        finally:
            self.generate_s += time.perf_counter() - t0


def _serve(msg: tuple, engine: _NewestWeights, bound: list):
    if msg[0] == "generate":
        return engine.generate(msg[1], msg[2])
    if msg[0] == "bind":
        bound.append(msg[1])
        return len(bound) - 1
    if msg[0] == "call":
        t0 = engine.generate_s
        result = bound[msg[1]](*msg[2], engine)
        return result, engine.generate_s - t0
    raise ValueError(f"unknown request {msg[0]!r}")


def _child(fd: int) -> None:
    """The child: build the model, then serve generate, bind and call requests until told to close."""
    from transformers import AutoModelForCausalLM

    from posttrain.engine.paged.local import LocalEngine

    conn = Connection(fd)
    path, layout, config, tokenizer, engine_config, threads = conn.recv()
    try:
        torch.set_num_threads(threads)
        shared = SharedWeights(Path(path), layout)
        engine = LocalEngine(AutoModelForCausalLM.from_config(config).eval(), tokenizer, config=engine_config)
        engine.policy_version = -1
        shared.read_into(engine)
        conn.send(("ok", None))
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    newest, bound = _NewestWeights(engine, shared), []
    while True:
        try:
            msg = conn.recv()
        except (EOFError, ConnectionResetError):  # the parent is gone
            return
        except Exception as e:  # the whole message arrived but does not unpickle here
            conn.send(("error", f"cannot receive the request: {type(e).__name__}: {e}"))
            continue
        if msg[0] == "close":
            return
        try:
            conn.send(("ok", _serve(msg, newest, bound)))
        except Exception as e:  # reported to the caller; the child keeps serving
            conn.send(("error", f"{type(e).__name__}: {e}"))


if __name__ == "__main__":
    _child(int(sys.argv[1]))
