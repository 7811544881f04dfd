"""The bubblewrap backend: namespaces, seccomp, a read-only system root, quotas, a warm runner.

Each sandbox owns a host directory (see hostdir.py) whose app/, tmp/ and logs/ are bound
writable at /app, /tmp and /logs, a cgroup (memory, pids, CPU) where the host allows
one, and one persistent bwrap running the runner loop (runner.py), so execs are cheap
and background processes live between commands, as in `docker exec`. A timeout, an
output flood, an OOM kill, a pids-limit hit or close() kills the sandbox's whole pid
namespace; the next exec starts a fresh runner, files stay. `mounts` on paths in
spec.mount_points are staged copies bound read-only; other mounts (or spec.warm=False) run in
a one-off bwrap of their own that shares the files but not the processes or the loopback
network of the runner (oneshot.py). The verifier runs in a one-off bwrap on its own copy of
the files, inside the runner's network namespace (verifier.py).
What this covers and what it does not: docs/sandbox-threats.md.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox import hostdir, servers
from posttrain.sandbox.base import KILLED_EXIT, Sandbox, SandboxSpec, VerifierRun
from posttrain.sandbox.bwrap import args as bwrap_args
from posttrain.sandbox.bwrap import oneshot, seccomp, verifier
from posttrain.sandbox.bwrap.launch import CgroupGone, Launcher, can_join_netns
from posttrain.sandbox.bwrap.limits import Limits, killed_by
from posttrain.sandbox.bwrap.runner import (RUNNER_SCRIPT, Namespace, Runner, oldest_child, once,
                                           wrapper_script)
from posttrain.sandbox.capture import Captured, Sink, capture
from posttrain.sandbox.cgroups import Cgroup
from posttrain.types import ExecResult

LONG_COMMAND = 100_000      # bytes; longer commands go through a file (one argv string <= 128 KiB)
NETWORK_MODES = ("no-network", "public")


class BwrapSandbox(Sandbox):
    """One bubblewrap sandbox; execs are serialised on the warm runner, one-offs run in parallel."""

    def __init__(self, spec: SandboxSpec):
        if spec.network not in NETWORK_MODES:
            raise SandboxError(
                f"network mode {spec.network!r} cannot be enforced by the bwrap backend: it "
                "offers 'no-network' (own network namespace) or 'public' (host network); "
                "a host allowlist needs a filtering proxy, which posttrain does not have")
        self.spec, self.bwrap = spec, bwrap_args.find_bwrap()
        self.limits = Limits.of(spec)
        self.id = uuid.uuid4().hex[:12]
        self.uid = hostdir.sandbox_host_uid()
        self.root, self._tmpfs = hostdir.create_root(self.id, self.limits.disk_mb, self.uid)
        self.cgroup: Cgroup | None = None
        self._closed, self._runner, self._busy = False, None, None   # _busy: its exec reads it
        self._lock, self._state = threading.Lock(), threading.Lock()
        self._oneshots: set[Namespace] = set()
        self._sink, self._staged_used = Sink(), set()
        try:
            self.cgroup = Cgroup.open(f"posttrain-{self.id}", self.limits.memory_mb,
                                      self.limits.pids, spec.cpus)
            self._seccomp = seccomp.build_filter()
            self.enforcement = self.limits.enforcement(self.cgroup, self._tmpfs, self._seccomp)
            self.enforcement["verifier"] = ("own namespaces and copy of the files"
                                            if can_join_netns() or spec.network == "public"
                                            else "shared with servers the agent left (not root)")
            self._launcher = Launcher(self.bwrap, self.root, spec.network, self._seccomp,
                                      self.uid, tuple(spec.hidden))
            self._record()
            if spec.warm:
                self._start_runner()
        except BaseException:
            self.close()
            raise

    def host_path(self, sandbox_path_: str) -> Path:
        return hostdir.sandbox_path(self.root, sandbox_path_)

    def give(self, host_path: Path) -> None:
        hostdir.chown_tree(Path(host_path), self.uid)

    def _record(self, **extra) -> None:
        cgroups = [str(d) for d in self.cgroup.dirs.values()] if self.cgroup else []
        hostdir.write_owner(self.root, cgroups=cgroups, tmpfs=self._tmpfs, **extra)

    def verifier_path(self, sandbox_path_: str) -> Path:
        return verifier.path(self.root, sandbox_path_)

    def _spawn(self, command: list[str], mounts: dict[str, Path] | None, staged: tuple[str, ...],
               **popen) -> Namespace:
        """Start a bwrap inside the sandbox's cgroups, made again where a reaper removed
        them while they were empty (idle, or just as this bwrap started: then once more)."""
        try:
            return self._launch(command, mounts, staged, **popen)
        except CgroupGone:
            return self._launch(command, mounts, staged, **popen)

    def _launch(self, command, mounts, staged, **popen) -> Namespace:
        if self.cgroup and not self.cgroup.exists():
            self.cgroup = Cgroup.open(f"posttrain-{self.id}", self.limits.memory_mb,
                                      self.limits.pids, self.spec.cpus)
        return self._launcher.spawn(command, mounts, staged, self.cgroup, **popen)

    def _start_runner(self) -> Runner:
        ns = self._spawn(["/bin/bash", "-c", RUNNER_SCRIPT], None, self.spec.mount_points,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
        with self._state:               # close() kills the runner it sees, or we do
            closed = self._closed
            if not closed:
                self._runner = Runner(ns, self.root / "ctl", self.uid)
        if closed:
            ns.kill()
            ns.close()
            raise SandboxError(f"sandbox {self.id} is closed")
        self._record(runner_pid=ns.proc.pid, runner_start=hostdir.process_start(ns.proc.pid))
        return self._runner

    def _script(self, command: str, env: dict[str, str] | None, files: list[Path]) -> str:
        workdir = self.spec.workdir
        if workdir.split("/")[1:2] and workdir.split("/")[1] in hostdir.WRITABLE:
            path = self.host_path(workdir)
            if not path.is_dir():
                path.mkdir(parents=True, exist_ok=True)
                self.give(self.host_path("/" + workdir.split("/")[1]))
        command_file = None
        if len(command.encode()) > LONG_COMMAND:
            name = f"cmd-{uuid.uuid4().hex[:8]}"
            files.append(self.root / "ctl" / name)
            files[-1].write_text(command)
            command_file = f"/run/ctl/{name}"
        return wrapper_script(command, bwrap_args.base_env(self.spec.env, env), workdir,
                              self.limits.ulimits(self.cgroup, self._tmpfs), command_file)

    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        mounts = mounts or {}
        for dest, src in mounts.items():
            if not dest.startswith("/") or not Path(src).exists():
                raise SandboxError(f"bad mount {dest!r} <- {str(src)!r}: the sandbox path must "
                                   "be absolute and the host path must exist")
        files: list[Path] = []
        try:
            script = self._script(command, env, files)
            staged = self.spec.mount_points
            if self.spec.warm and all(d in staged and Path(s).is_dir() for d, s in mounts.items()):
                with self._lock:
                    return self._exec_warm(script, timeout_s, mounts)
            name = f"once-{uuid.uuid4().hex[:8]}.sh"
            files.append(self.root / "ctl" / name)
            files[-1].write_text(script)
            return oneshot.run(self, f"/run/ctl/{name}", timeout_s, mounts)
        except OSError as e:
            if self._closed:            # close() from another thread removed its files
                raise SandboxError(f"sandbox {self.id} is closed") from e
            raise
        finally:
            for path in files:
                path.unlink(missing_ok=True)

    def _exec_warm(self, script: str, timeout_s: float, mounts: dict[str, Path]) -> ExecResult:
        if self._closed:                # closed while we waited for the lock
            raise SandboxError(f"sandbox {self.id} is closed")
        start = time.monotonic()
        if not (self._runner and self._runner.alive):
            self._kill_runner()         # its bwrap died: its namespace init may not have
            self._start_runner()
        runner = self._runner
        self._stage(mounts)
        before = self.cgroup.counters() if self.cgroup else None
        fds, dummies = runner.begin(script)
        on_done = once(lambda: [os.close(fd) for fd in dummies])
        self._busy = runner
        try:
            got = capture(fds, deadline=start + timeout_s, limit=self.spec.output_limit,
                          hard_limit=self.limits.hard_output, kill=self._kill_runner,
                          done=runner.finished, on_done=on_done,
                          control={runner.ns.proc.stdout.fileno(): runner.on_status})
        finally:
            self._busy = None
        on_done()
        self._release_fds(fds, got)
        if not self._closed:            # close() from another thread removes the files
            runner.cleanup()
            self._stage({})
        outside = runner.killed_from_outside()
        if runner.dead and self._runner is runner:
            self._kill_runner()     # it died by itself (OOM, killed from inside or outside)
        if self._runner is not runner:
            runner.ns.close()       # killed while we read its pipes: now nobody does
        code = runner.exit_code if runner.exit_code is not None else KILLED_EXIT
        result = self._result(got, code, start, before)
        if outside and result.killed_by == "none":   # not the command's doing: a fault, retried
            raise SandboxError(f"sandbox {self.id}: its bwrap was killed from outside mid-command")
        if result.killed_by in ("memory", "pids") and self._runner is runner:
            self._kill_runner()     # what a bomb left behind goes with it
        return result

    def _stage(self, mounts: dict[str, Path]) -> None:
        """Fill the staged mount dirs for this command; empty the ones used last time."""
        for i, dest in enumerate(self.spec.mount_points):
            target = self.root / "mnt" / str(i)
            if dest in mounts:
                hostdir.stage_mount(target, mounts[dest], self.uid)
                self._staged_used.add(dest)
            elif dest in self._staged_used:
                hostdir.clear_dir(target)
                self._staged_used.discard(dest)

    def _release_fds(self, fds: dict[str, int], got: Captured) -> None:
        for fd in fds.values():
            if fd not in got.lingering:
                os.close(fd)
        self._sink.adopt(got.lingering)

    def _kill_runner(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.dead = runner.host_killed = True
            runner.ns.kill()
            if runner is not self._busy:    # else its exec, still reading, closes it
                runner.ns.close()

    def run_verifier(self, command: str, timeout_s: float, env: dict[str, str],
                     tests: Path) -> VerifierRun:
        return verifier.run(self, command, timeout_s, env, tests)

    def _result(self, got: Captured, code: int, start: float, before: dict | None) -> ExecResult:
        after = self.cgroup.counters() if self.cgroup else None
        why = killed_by(got.timed_out, got.output_killed, before, after, code)
        if why in ("timeout", "output") or got.timed_out:
            code = KILLED_EXIT
        return ExecResult(exit_code=code, stdout=got.text("stdout"), stderr=got.text("stderr"),
                          duration_s=time.monotonic() - start, timed_out=got.timed_out,
                          truncated=got.truncated, killed_by=why)

    def reset(self) -> None:
        super().reset()
        verifier.drop(self.root)

    def stop_processes(self) -> None:
        """Kill the runner's namespace and any one-off exec; the next exec starts afresh."""
        with self._state:
            oneshots = list(self._oneshots)
        self._kill_runner()
        for ns in oneshots:
            ns.kill()

    def stop_all_but_servers(self) -> None:
        """Keep the runner and what serves in its namespace; one-off execs have their own
        namespaces, which no later command reaches, so they go."""
        with self._state:
            oneshots = list(self._oneshots)
        for ns in oneshots:
            ns.kill()
        with self._lock:                # not under a running command
            runner = self._runner
            init = runner.ns.init_pid() if runner and runner.alive else None
            if init is None:
                return
            keep = {init, *oldest_child(init)}
            if not servers.kill_all_but_servers(lambda: servers.namespace_pids(init), keep):
                self._kill_runner()

    def close(self) -> None:
        with self._state:
            if self._closed:
                return
            self._closed = True
        self.stop_processes()
        if self.cgroup:
            self.cgroup.remove()
        self._sink.close()
        hostdir.remove_root(self.root, getattr(self, "_tmpfs", False))
