"""Real processes on loopback for the gateway tests: the scripted backend and the gateway itself."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
BACKEND = ROOT / "bench" / "scripted_backend.py"


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

    def __init__(self, args: list[str], ready_url: str, env: dict | None = None):
        self.args, self.ready_url = args, ready_url
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Proc":
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)
        wait_ready(self.ready_url, self.proc)
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


def backend(port: int, *extra: str) -> Proc:
    return Proc([sys.executable, str(BACKEND), "--port", str(port), "--name", f"b{port}", *extra],
                f"http://127.0.0.1:{port}/health")


def gateway(config_path: Path, port: int) -> Proc:
    return Proc([sys.executable, "-m", "posttrain", "gateway", str(config_path)], f"http://127.0.0.1:{port}/health")


def toml_config(port: int, audit: Path, variants: dict[str, list[int]], extra: str = "", **top) -> str:
    """A gateway config whose variants point at scripted backends on the given ports."""
    lines = [f'port = {port}', f'audit_db = "{audit}"', 'default_variant = "standard"', "cooldown_s = 0.5",
             "health_interval_s = 0.2"] + [f"{k} = {v!r}".replace("'", '"') for k, v in top.items()]
    for name, ports in variants.items():
        urls = ", ".join(f'"http://127.0.0.1:{p}/v1"' for p in ports)
        lines += [f"[variants.{name}]", f"backends = [{urls}]", f'weights_version = "{name}-v1"']
    return "\n".join(lines) + "\n" + extra
