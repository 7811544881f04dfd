"""The docker backend: a container per sandbox, built from the task's environment/.

Isolation, as strict as bwrap where the engine allows, is in the container's `docker run`
flags (isolation.py): a random unprivileged host uid (bwrap's `sandbox_host_uid`) unless the
spec asks for root; /app, /tmp and /logs bound from the sandbox's host dir (a tmpfs of
`disk_mb`), /tests and /solution bound read-only from staged dirs and filled only for the
command that asks. The image's own /app is copied into the host dir first.

A timeout, an output flood or stop_processes() freezes the container and kills every
process but its init from the host (a cancelled `docker exec` client leaves its
process running); when the cgroup is not visible the container is killed and started.
Before the verifier, stop_all_but_servers() keeps what serves (sandbox/servers.py); the
verifier then runs as a uid those servers are not (verifier.py).

A task with environment/docker-compose.yaml also gets its sidecars (compose.py):
they start first, on the project's internal network, which this container then joins.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import uuid
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox import hostdir, servers
from posttrain.sandbox.base import Sandbox, SandboxSpec, VerifierRun
from posttrain.sandbox.docker import build as docker_build
from posttrain.sandbox.docker import cli as engine
from posttrain.sandbox.docker import compose as docker_compose
from posttrain.sandbox.docker import execute, isolation, layer
from posttrain.sandbox.docker import verifier as verifier_phase
from posttrain.sandbox.docker.cgroup import ContainerCgroup
from posttrain.sandbox.docker.compose_policy import Limits
from posttrain.sandbox.docker.isolation import DEFAULT_DISK_MB, DEFAULT_MEMORY_MB, DEFAULT_PIDS
from posttrain.types import ExecResult

DEFAULT_IMAGE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")


class DockerSandbox(Sandbox):
    """One container; started by the first exec, after build_environment() if any."""

    _app_tars: dict[str, bytes] = {}      # image -> its /app as a tar (tags are content hashes)

    def __init__(self, spec: SandboxSpec, container_cli: engine.ContainerCLI):
        self.container_cli, self.cli, self.spec = container_cli, container_cli.path, spec
        self.id = f"posttrain-{uuid.uuid4().hex[:12]}"
        self.as_root = spec.user in ("root", "0")
        self.verifier_root = (spec.verifier_user or spec.user) in ("root", "0")
        self.uid = None if self.as_root else hostdir.sandbox_host_uid()
        self.root, self.tmpfs = hostdir.create_root(self.id, spec.disk_mb or DEFAULT_DISK_MB,
                                                    self.uid)
        for point in spec.mount_points:
            (self.root / "mnt" / point.strip("/").replace("/", "_")).mkdir()
        hostdir.write_owner(self.root, container=self.id, engine=container_cli.name,
                            tmpfs=self.tmpfs)
        self.image, self.build = DEFAULT_IMAGE, None
        self.cgroup: ContainerCgroup | None = None
        self.compose: docker_compose.ComposeProject | None = None
        self._started = self._closed = False
        self.enforcement = {"memory": "docker cgroup", "pids": "docker cgroup",
                            "disk": "tmpfs" if self.tmpfs else "none",
                            "root_fs": "writable" if self.writable_root else "read-only",
                            "user": "root" if self.as_root else f"uid {self.uid or 'image'}"}

    @property
    def writable_root(self) -> bool:
        return self.as_root or self.verifier_root

    def build_environment(self, env_dir: Path) -> None:
        """Build (or take from the cache) the image of the task's environment/, and prepare
        its sidecars when it has a docker-compose.yaml (compose.py)."""
        if self._started:            # a pooled sandbox given a task: start afresh from its image
            self._remove_containers()
        env_dir, self.image, self.build = Path(env_dir), DEFAULT_IMAGE, None
        if (env_dir / "Dockerfile").is_file():
            self.build = docker_build.build(self.cli, env_dir, self.spec.build_timeout_s or 600)
            self.image = self.build.image
        if docker_compose.compose_file(env_dir):
            self._prepare_compose(env_dir)

    def _prepare_compose(self, env_dir: Path) -> None:
        s = self.spec
        limits = Limits(s.memory_mb or DEFAULT_MEMORY_MB, s.pids or DEFAULT_PIDS, s.cpus,
                        s.network == "public", {engine.LABEL: str(os.getpid())})
        harbor = docker_compose.harbor_env(self.image, env_dir, self.root, s.cpus or 1,
                                           limits.memory_mb)
        self.compose = docker_compose.ComposeProject(self.container_cli, env_dir, self.id,
                                                     self.root, limits, {**s.env, **harbor})
        hostdir.write_owner(self.root, container=self.id, engine=self.container_cli.name,
                            tmpfs=self.tmpfs, compose_project=self.id)
        request = self.compose.prepare(s.build_timeout_s or 600)
        s.env.update(request.environment)
        s.workdir = request.working_dir or s.workdir
        if self.build is None and request.image:       # main from a prebuilt image
            self.image = docker_build.map_base(request.image, docker_build.base_map())
            docker_build.ensure_base(self.cli, self.image)

    def _user(self, verifier: bool) -> str:
        if self.verifier_root if verifier else self.as_root:
            return "0:0"
        return f"{self.uid}:{self.uid}" if self.uid else "1000:1000"

    def staged_path(self, point: str) -> Path:
        """The host dir staged at mount point `point` (filled per command)."""
        return self.root / "mnt" / point.strip("/").replace("/", "_")

    def _seed_app(self) -> None:
        """Copy the image's /app into the host dir that hides it (a bind mount)."""
        if self.image not in self._app_tars:
            tmp = engine.run(self.cli, "create", "--label", f"{engine.LABEL}={os.getpid()}",
                             self.image, "true").stdout.decode().strip()
            try:
                done = engine.run(self.cli, "cp", f"{tmp}:/app/.", "-", check=False, timeout=300)
            finally:
                engine.run(self.cli, "rm", "-f", tmp, check=False)
            self._app_tars[self.image] = done.stdout if done.returncode == 0 else b""
        if self._app_tars[self.image]:
            with tarfile.open(fileobj=io.BytesIO(self._app_tars[self.image])) as tar:
                tar.extractall(self.root / "app", filter="tar")
            hostdir.chown_tree(self.root / "app", self.uid)

    def _start(self) -> None:
        if self.image != DEFAULT_IMAGE or self.build is not None:
            self._seed_app()
        elif not engine.image_exists(self.cli, self.image):
            docker_build.ensure_base(self.cli, self.image)
        workdir = engine.inspect(self.cli, self.image, "{{.Config.WorkingDir}}") or self.spec.workdir
        if self.compose:
            self.compose.up()
        self.spec.workdir = workdir
        # The main process (init, `sleep infinity`) is root without capabilities, so the
        # sandbox user cannot kill it (`kill -9 -1`) and stop the container. `run` and
        # `start` run in the sandbox's dir: Podman's conmon keeps their working directory
        # and creates an empty `oom` file there at each OOM kill (close() removes the dir).
        try:
            engine.run(self.cli, *isolation.run_args(self), "--user", "0:0", "-w", workdir, self.image,
                       "sleep", "infinity", cwd=self.root)
        except SandboxError:          # `run` may have created the container before failing
            engine.run(self.cli, "rm", "-f", self.id, check=False, timeout=120)
            raise
        self._started = True
        self._find_cgroup()

    def _find_cgroup(self) -> None:
        self.cgroup = ContainerCgroup.find(int(engine.inspect(self.cli, self.id, "{{.State.Pid}}")))
        self.enforcement["kill"] = "freeze and kill" if self.cgroup else "restart"

    def _restart(self) -> None:
        engine.run(self.cli, "start", self.id, check=False, cwd=self.root)
        self._find_cgroup()

    def _running(self) -> bool:
        done = engine.run(self.cli, "inspect", "--format", "{{.State.Running}}", self.id,
                          check=False, timeout=30)
        return done.stdout.decode().strip() == "true"

    def _remove_containers(self) -> None:
        """The main container and the compose project, if any; the next exec starts anew."""
        if self._started:
            engine.run(self.cli, "rm", "-f", self.id, check=False, timeout=120)
        if self.compose:
            self.compose.down()
            self.compose = None
        self._started, self.cgroup = False, None

    def host_path(self, sandbox_path: str) -> Path:
        return hostdir.sandbox_path(self.root, sandbox_path)

    def give(self, host_path: Path) -> None:
        hostdir.chown_tree(host_path, self.uid)

    def export_layer(self, dest: Path) -> bool:
        """The container's changes to its root outside the bound dirs (docker/layer.py)."""
        if not self._started or not self.writable_root:
            return False
        return layer.export_layer(self.cli, self.id, dest)

    def import_layer(self, src: Path) -> None:
        if not Path(src).is_dir():
            return
        if not self._started:
            self._start()
        layer.import_layer(self.cli, self.id, Path(src))

    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        if not self._started:
            self._start()
        for dest, src in (mounts or {}).items():
            if dest not in self.spec.mount_points:
                raise SandboxError(f"the docker backend mounts only at {self.spec.mount_points}, "
                                   f"not {dest}")
            hostdir.stage_mount(self.staged_path(dest), Path(src), self.uid)
        try:
            return self.run_as(command, timeout_s, env, self._user("/tests" in (mounts or {})))
        finally:
            for dest in mounts or {}:
                hostdir.clear_dir(self.staged_path(dest))

    def run_as(self, command: str, timeout_s: float, env: dict[str, str] | None,
               user: str) -> ExecResult:
        """One command as `user` ("uid:gid"), the container started if need be."""
        if not self._started:
            self._start()
        result = execute.run(self, command, timeout_s, env, user)
        if result.exit_code != 0 and not self._running():
            self._restart()                    # a root agent killed its init
            result = execute.run(self, command, timeout_s, env, user)
        return result

    def run_verifier(self, command: str, timeout_s: float, env: dict[str, str],
                     tests: Path) -> VerifierRun:
        return verifier_phase.run(self, command, timeout_s, env, tests)

    def stop_processes(self) -> None:
        """Kill every process in the container except its init; files stay."""
        if not self._started:
            return
        if self.cgroup is not None:
            engine.run(self.cli, "pause", self.id, check=False)
            try:
                self.cgroup.kill_all_but()
            finally:
                engine.run(self.cli, "unpause", self.id, check=False)
            if self.cgroup.wait_empty_but_init():
                return
        engine.run(self.cli, "kill", self.id, check=False)
        self._restart()

    def stop_all_but_servers(self) -> None:
        """Kill every process except the container's init and what serves, frozen first so
        nothing forks in between; without a visible cgroup, everything goes."""
        if not self._started:
            return
        if self.cgroup is None:
            self.stop_processes()
            return
        engine.run(self.cli, "pause", self.id, check=False)
        try:
            pids = self.cgroup.pids()
            self.cgroup.kill(set(pids) - servers.serving(pids))
        finally:
            engine.run(self.cli, "unpause", self.id, check=False)
        if not servers.kill_all_but_servers(self.cgroup.pids, set()):
            self.stop_processes()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._remove_containers()
        hostdir.remove_root(self.root, self.tmpfs)
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
