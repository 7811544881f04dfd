"""Multi-container tasks: the sidecars of a task's environment/docker-compose.yaml run as
one compose project beside the sandbox's main container, on one internal network.

Harbor's layout: service `main` is the agent's container (built from environment/Dockerfile),
the others are sidecars the agent reaches by service name. The file is read with
`docker-compose config` in a clean environment that holds only Harbor's variables
(MAIN_IMAGE_NAME, CONTEXT_DIR, the HOST_/ENV_ log paths, CPUS, MEMORY) and the task's
[environment].env, so a ${VAR} can never pull a host secret into a container. The
policy (compose_policy.py) refuses what would reach the host and applies the sandbox's
isolation to every sidecar; sidecar images are built by docker_build (content-hash
cache, base map, proxy pass-through, build log, build timeout), so compose itself only
creates the network, the volumes and the containers, and tears them down.

The compose CLI: POSTTRAIN_COMPOSE_CLI, else `docker-compose` (Debian bookworm's 1.29
package: what this kind of machine can install), else the `docker compose` v2 plugin.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from posttrain.errors import SandboxError
from posttrain.sandbox.docker import build as docker_build
from posttrain.sandbox.docker import cli as engine
from posttrain.sandbox.docker import compose_policy
from posttrain.sandbox.docker.compose_policy import Limits, MainRequest
from posttrain.sandbox.environment import COMPOSE_FILES

PROJECT_LABEL = "com.docker.compose.project"   # compose puts it on everything it creates
BUILD_KEYS = {"context", "dockerfile"}
PASSED_ENV = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
              "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION")


def compose_file(env_dir: Path) -> Path | None:
    return next((Path(env_dir) / n for n in COMPOSE_FILES if (Path(env_dir) / n).is_file()), None)


def harbor_env(image: str, env_dir: Path, root: Path, cpus: float, memory_mb: int) -> dict:
    """Harbor's variables for the compose file: the main image, the build context, the limits,
    and each log dir as the container sees it (ENV_) and as the host holds it (HOST_)."""
    env = {"MAIN_IMAGE_NAME": image, "CONTEXT_DIR": str(env_dir.resolve()),
           "CPUS": str(cpus), "MEMORY": f"{memory_mb}M"}
    for var, path in (("VERIFIER_LOGS", "logs/verifier"), ("AGENT_LOGS", "logs/agent"),
                      ("ARTIFACTS", "logs/artifacts")):
        env[f"ENV_{var}_PATH"], env[f"HOST_{var}_PATH"] = f"/{path}", str(root / path)
    return env


def compose_cli() -> list[str]:
    """The compose command; a one-line SandboxError when there is none."""
    if os.environ.get("POSTTRAIN_COMPOSE_CLI"):
        return shlex.split(os.environ["POSTTRAIN_COMPOSE_CLI"])
    if shutil.which("docker-compose"):
        return [shutil.which("docker-compose")]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 timeout=30).returncode == 0:
        return [docker, "compose"]
    raise SandboxError("a multi-container task (environment/docker-compose.yaml) needs Docker "
                       "Compose: `apt-get install docker-compose` (scripts/ci/docker.sh does) "
                       "or set POSTTRAIN_COMPOSE_CLI")


class ComposeProject:
    """The sidecars of one sandbox: prepare() reads and checks the file and builds images,
    up() starts them and waits until they are healthy, down() removes everything."""

    def __init__(self, container_cli: engine.ContainerCLI, env_dir: Path, name: str,
                 root: Path, limits: Limits, env: dict[str, str]):
        if not container_cli.supports_compose:
            raise SandboxError("multi-container tasks (docker-compose.yaml) need the Docker "
                               f"engine; under {container_cli.name} they are not supported yet")
        self.cli, self.env_dir, self.name = container_cli.path, Path(env_dir).resolve(), name
        self.limits = limits
        self.compose = compose_cli()
        self.file = root / "compose.yaml"
        self.env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ} | env

    @property
    def network(self) -> str:
        return f"{self.name}_default"

    def _run(self, *args: str, file: Path, timeout: float = 300,
             check: bool = True) -> subprocess.CompletedProcess:
        argv = [*self.compose, "-p", self.name, "--project-directory", str(self.env_dir),
                "-f", str(file), *args]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout, env=self.env,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SandboxError(f"compose {args[0]} did not finish in {timeout:g} s") from None
        if check and done.returncode != 0:
            raise SandboxError(f"compose {args[0]} of {self.env_dir} failed: "
                               f"{engine.last_line(done.stderr.decode(errors='replace'))}")
        return done

    def prepare(self, build_timeout_s: float) -> MainRequest:
        """Read the task's file, apply the policy, build sidecar images, write our file."""
        text = self._run("config", file=compose_file(self.env_dir), timeout=60).stdout
        project, request = compose_policy.project(yaml.safe_load(text) or {}, self.env_dir,
                                                  self.limits)
        for name, svc in project["services"].items():
            self._image(name, svc, build_timeout_s)
        self.file.write_text(yaml.safe_dump(project, sort_keys=False))
        return request

    def _image(self, name: str, svc: dict, timeout_s: float) -> None:
        build = svc.pop("build", None)
        svc.pop("pull_policy", None)
        if build is not None:
            build = {"context": build} if isinstance(build, str) else build
            extra = set(build) - BUILD_KEYS
            if extra:
                raise SandboxError(f"docker-compose.yaml: service {name!r}: build keys "
                                   f"{sorted(extra)} are not supported (only context, dockerfile)")
            built = docker_build.build(self.cli, Path(build["context"]), timeout_s,
                                       build.get("dockerfile", "Dockerfile"))
            svc["image"] = built.image
        elif svc.get("image"):
            svc["image"] = docker_build.map_base(svc["image"], docker_build.base_map())
            docker_build.ensure_base(self.cli, svc["image"])
        else:
            raise SandboxError(f"docker-compose.yaml: service {name!r} has neither image nor build")

    def up(self, timeout_s: float = 120) -> None:
        """Start the sidecars; return once each is running (healthy if it has a check)."""
        self._run("up", "-d", "--no-build", file=self.file, timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            if time.monotonic() > deadline:
                raise SandboxError(f"compose services of {self.env_dir} not healthy after "
                                   f"{timeout_s:g} s")
            time.sleep(0.2)

    def _ready(self) -> bool:
        ids = engine.run(self.cli, "ps", "-aq", "--filter", f"label={PROJECT_LABEL}={self.name}",
                         timeout=30).stdout.decode().split()
        fmt = ("{{.Name}} {{.State.Status}} {{.State.ExitCode}} "
               "{{if .State.Health}}{{.State.Health.Status}}{{end}}")
        ready = True
        for cid in ids:
            name, status, code, *health = engine.inspect(self.cli, cid, fmt).split()
            if status in ("exited", "dead") and code != "0" or health == ["unhealthy"]:
                logs = engine.run(self.cli, "logs", "--tail", "5", cid, check=False, timeout=30)
                tail = (logs.stdout + logs.stderr).decode(errors="replace").strip().splitlines()
                raise SandboxError(f"compose service {name.strip('/')} is {health[0] if health else status}"
                                   f" (exit {code}): {tail[-1] if tail else 'no output'}")
            ready &= status == "exited" or (status == "running" and health in ([], ["healthy"]))
        return ready

    def down(self) -> None:
        """Remove the project's containers, network and volumes, found by the label compose
        puts on each (`rm -f`: a sandbox is thrown away, so nothing waits for a graceful
        stop; `compose down -t 1` took 1.7 s of a 5.6 s sidecar attempt, this 0.5 s)."""
        remove_project(self.cli, self.name)


def remove_project(cli: str, name: str) -> None:
    """Everything compose made for project `name`, found by its label (`rm -v`: a sidecar's
    anonymous volumes, which carry no label, go with it as under `compose down -v`)."""
    label = f"label={PROJECT_LABEL}={name}"
    for kind, rm in (("ps -aq", "rm -fv"), ("network ls -q", "network rm"),
                     ("volume ls -q", "volume rm -f")):
        ids = engine.run(cli, *kind.split(), "--filter", label, check=False, timeout=60)
        if ids.stdout.split():     # one command for all: each removal goes on past a failure
            engine.run(cli, *rm.split(), *ids.stdout.decode().split(), check=False, timeout=120)
