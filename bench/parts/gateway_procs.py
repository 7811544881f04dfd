"""Real processes on loopback for the gateway bench and tests: scripted backends, the gateway, any server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

BACKEND = Path(__file__).resolve().parent / "scripted_backend.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} not ready after {timeout_s} s")


class Proc:
    """A server process started and stopped by the test; stop() sends SIGTERM (clean shutdown)."""

    def __init__(self, args: list[str], ready_url: str, env: dict | None = None, ready_timeout_s: float = 60.0,
                 cpus: set[int] | None = None):
        self.args, self.ready_url, self.ready_timeout_s, self.cpus = args, ready_url, ready_timeout_s, cpus
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Proc":
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env,
                                     preexec_fn=pinned(self.cpus))
        try:
            wait_ready(self.ready_url, self.proc, self.ready_timeout_s)
        except RuntimeError:
            self.stop(signal.SIGKILL)
            raise
        return self

    def stop(self, sig=signal.SIGTERM) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None


def pinned(cpus: set[int] | None):
    """A preexec_fn that pins the child (and the threads it starts) to `cpus`; None leaves it free."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its threads so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backend(port: int, *extra: str, serves: list[str], cpus: set[int] | None = None) -> Proc:
    """A scripted backend whose /v1/models lists `serves` (the model ids the gateway will send it)."""
    listed = [arg for model in serves for arg in ("--serves", model)]
    return Proc([sys.executable, str(BACKEND), "--port", str(port), "--name", f"b{port}", *listed, *extra],
                f"http://127.0.0.1:{port}/health", cpus=cpus)


def served_by(variants: dict[str, list[int]], port: int) -> list[str]:
    """The model ids a gateway config from toml_config(variants) sends to the backend on `port`."""
    return [name for name, ports in variants.items() if port in ports]


def gateway(config_path: Path, port: int, cpus: set[int] | None = None) -> Proc:
    return Proc([sys.executable, "-m", "posttrain", "gateway", str(config_path)], f"http://127.0.0.1:{port}/health",
                cpus=cpus)


def toml_config(port: int, audit: Path, variants: dict[str, list[int]], extra: str = "", **top) -> str:
    """A gateway config whose variants point at scripted backends on the given ports."""
    settings = {"port": port, "audit_db": str(audit), "default_variant": "standard", "cooldown_s": 0.5,
                "health_interval_s": 0.2, **top}
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    for name, ports in variants.items():
        urls = ", ".join(f'"http://127.0.0.1:{p}/v1"' for p in ports)
        lines += [f"[variants.{name}]", f"backends = [{urls}]", f'weights_version = "{name}-v1"']
    return "\n".join(lines) + "\n" + extra


@contextmanager
def running(*procs: Proc):
    """Start the processes in order; stop every one that started, whatever happens."""
    started = []
    try:
        for p in procs:
            started.append(p.start())
        yield procs
    finally:
        for p in reversed(started):
            p.stop()
