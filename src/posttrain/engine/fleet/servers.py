"""Start, health-check and stop engine servers (vLLM's OpenAI server, one process group per
replica) behind a watchdog, so none outlives the trainer; logs go to the run directory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

import posttrain
from posttrain.errors import EngineError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_pythonpath(run_dir: Path) -> Path:
    """A directory holding only the posttrain package (a symlink), for the server's PYTHONPATH:
    vLLM imports our worker extension from it without seeing the trainer's site-packages."""
    root = run_dir / "engines" / "pythonpath"
    root.mkdir(parents=True, exist_ok=True)
    link = root / "posttrain"
    if not link.exists():
        link.symlink_to(Path(posttrain.__file__).parent, target_is_directory=True)
    return root


# What the trainer needs of a vLLM server: logprobs after temperature (what it trains on), a fixed
# seed, and the worker extension that loads new weights. VLLM_SERVER_DEV_MODE goes with them.
TRAINING_FLAGS = ["--logprobs-mode", "processed_logprobs", "--seed", "0",
                  "--worker-extension-cls", "posttrain.engine.fleet.vllm_worker.WeightSyncExtension"]


@dataclass
class ServerSpec:
    """How to start one vLLM replica. `python` is the interpreter of vLLM's own environment."""

    python: str
    model_dir: str
    log_path: Path
    port: int = 0                          # 0: pick a free one
    dtype: str = "float32"
    max_model_len: int | None = 2048       # None: the model's own context (vLLM's default)
    cores: str | None = None               # VLLM_CPU_OMP_THREADS_BIND, e.g. "0" or "0-1"
    kv_cache_gib: int = 1                  # VLLM_CPU_KVCACHE_SPACE
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    enforce_eager: bool = True             # --enforce-eager: no torch.compile, a start minutes sooner
    for_training: bool = True              # the flags a trainer needs (TRAINING_FLAGS, dev routes)

    def command(self, port: int) -> list[str]:
        return [self.python, "-m", "vllm.entrypoints.openai.api_server", *self.server_args(port)]

    def server_args(self, port: int) -> list[str]:
        """vLLM's arguments after the module name; each one sets something off vLLM's default."""
        args = ["--model", self.model_dir, "--served-model-name", "policy", "--host", "127.0.0.1",
                "--port", str(port), "--dtype", self.dtype]
        if self.max_model_len is not None:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.for_training:
            args += TRAINING_FLAGS
        if self.enforce_eager:
            args.append("--enforce-eager")
        return args + list(self.extra_args)

    def env_overrides(self) -> dict[str, str]:
        """The vLLM environment variables this spec sets (beside PYTHONPATH)."""
        env = {"VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib)}
        if self.for_training:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        if self.cores is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.cores
        return env | self.env

    def environment(self, pythonpath: Path) -> dict[str, str]:
        env = dict(os.environ) | {"PYTHONPATH": str(pythonpath)}
        env.pop("VIRTUAL_ENV", None)
        return env | self.env_overrides()


class EngineServer:
    """One server process group under a watchdog; `start` returns once /health answers."""

    def __init__(self, spec: ServerSpec, pythonpath: Path):
        self.spec, self.pythonpath = spec, pythonpath
        self.port = spec.port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> None:
        """Start the process; does not wait for it (see wait_ready)."""
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.spec.log_path, "ab")
        cmd = [sys.executable, "-m", "posttrain.engine.fleet.watchdog", str(os.getpid()), "--",
               *self.spec.command(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self.spec.environment(self.pythonpath))
        log.close()

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise EngineError(f"the engine server exited before it was ready; "
                                  f"last lines of {self.spec.log_path}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.stop()
        raise EngineError(f"the engine server was not healthy after {timeout_s:.0f} s; "
                          f"see {self.spec.log_path}:\n{self.log_tail()}")

    def start(self, timeout_s: float = 600.0) -> EngineServer:
        self.launch()
        self.wait_ready(timeout_s)
        return self

    def log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.spec.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the watchdog (it stops the whole group), SIGKILL it if it hangs."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
