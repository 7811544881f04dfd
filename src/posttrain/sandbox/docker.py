"""The docker backend: for tasks whose environment/Dockerfile needs a real image build.

Used only when a Docker engine answers; otherwise creating it raises SandboxError naming
what is missing (the CLI, or the engine behind it). The container runs `sleep infinity`
with /app, /tmp and /logs bound from a host dir (so host_path works as for bwrap),
`--network none` unless the spec says public, and docker's memory, pids and CPU limits.
A timeout kills and restarts the whole container: `docker exec` clients that are
cancelled leave their processes running, so killing the client is not enough. `mounts`
are `docker cp` copies removed after the command: unlike bwrap they are not read-only
to root inside the container. Not exercised in CI (no engine there).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox import hostdir
from posttrain.sandbox.base import Sandbox, SandboxSpec
from posttrain.sandbox.capture import capture
from posttrain.types import ExecResult

DEFAULT_IMAGE = "debian:bookworm-slim"


def docker_cli() -> str:
    """The docker CLI, if an engine answers through it; a clear SandboxError otherwise."""
    cli = shutil.which("docker")
    if cli is None:
        raise SandboxError("the docker backend needs a Docker engine, and there is no `docker` "
                           "CLI on PATH; install Docker or use the bwrap backend")
    try:
        done = subprocess.run([cli, "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        raise SandboxError("the docker backend needs a Docker engine; `docker version` did "
                           "not answer in 10 s") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no answer"])[0]
        raise SandboxError(f"the docker backend needs a reachable Docker engine "
                           f"(DOCKER_HOST or /var/run/docker.sock): {first}")
    return cli


class DockerSandbox(Sandbox):
    """One container; started by the first exec, after build_environment() if any."""

    def __init__(self, spec: SandboxSpec):
        self.cli, self.spec = docker_cli(), spec
        self.id = f"posttrain-{uuid.uuid4().hex[:12]}"
        self.root, _ = hostdir.create_root(self.id, None)
        hostdir.write_owner(self.root, container=self.id)
        self.image, self._started, self._closed = DEFAULT_IMAGE, False, False

    def _docker(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        done = subprocess.run([self.cli, *args], capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise SandboxError(f"docker {args[0]} failed: {done.stderr.strip()[:500]}")
        return done

    def build_environment(self, env_dir: Path) -> None:
        """`docker build` the task's environment/ (called by prepare_environment)."""
        self.image = f"{self.id}:latest"
        self._docker("build", "-q", "-t", self.image, str(env_dir))

    def _start(self) -> None:
        net = "bridge" if self.spec.network == "public" else "none"
        args = ["run", "-d", "--name", self.id, "--network", net, "--init",
                "--security-opt", "no-new-privileges"]
        for name in hostdir.WRITABLE:
            args += ["-v", f"{self.root / name}:/{name}"]
        if self.spec.memory_mb:
            args += ["--memory", f"{self.spec.memory_mb}m"]
        if self.spec.pids:
            args += ["--pids-limit", str(self.spec.pids)]
        if self.spec.cpus:
            args += ["--cpus", str(self.spec.cpus)]
        self._docker(*args, self.image, "sleep", "infinity")
        self._started = True

    def host_path(self, sandbox_path: str) -> Path:
        return hostdir.sandbox_path(self.root, sandbox_path)

    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        if not self._started:
            self._start()
        for dest, src in (mounts or {}).items():
            self._docker("cp", f"{src}/." if Path(src).is_dir() else str(src), f"{self.id}:{dest}")
        argv = [self.cli, "exec", "-w", self.spec.workdir]
        for k, v in {**self.spec.env, **(env or {})}.items():
            argv += ["-e", f"{k}={v}"]
        start = time.monotonic()
        proc = subprocess.Popen(argv + [self.id, "bash", "-c", command], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        got = capture({"stdout": proc.stdout.fileno(), "stderr": proc.stderr.fileno()},
                      deadline=start + timeout_s, limit=self.spec.output_limit,
                      hard_limit=max(self.spec.output_hard_limit, self.spec.output_limit),
                      kill=self.stop_processes, done=lambda: proc.poll() is not None)
        proc.wait()
        for dest in mounts or {}:
            subprocess.run([self.cli, "exec", "-u", "0", self.id, "rm", "-rf", dest],
                           capture_output=True)
        killed = "timeout" if got.timed_out else "output" if got.output_killed else "none"
        return ExecResult(exit_code=137 if killed != "none" else proc.returncode,
                          stdout=got.text("stdout"), stderr=got.text("stderr"),
                          duration_s=time.monotonic() - start, timed_out=got.timed_out,
                          truncated=got.truncated, killed_by=killed)

    def stop_processes(self) -> None:
        """Kill every process in the container (docker kill), then start it again."""
        if self._started:
            subprocess.run([self.cli, "kill", self.id], capture_output=True)
            subprocess.run([self.cli, "start", self.id], capture_output=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._started:
            subprocess.run([self.cli, "rm", "-f", self.id], capture_output=True)
        if self.image != DEFAULT_IMAGE:
            subprocess.run([self.cli, "rmi", "-f", self.image], capture_output=True)
        hostdir.remove_root(self.root, False)
