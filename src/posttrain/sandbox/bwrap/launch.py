"""Start one bwrap for a sandbox: the pipes it needs, its uid, and its way into the cgroups.

bwrap reports its namespace init's pid on --info-fd, reads the seccomp program from
--seccomp, and with --block-fd waits (after setting up its mounts, before forking the
command) until we have moved it and its init into the sandbox's cgroups. The first
migration after a quiet spell waits for an RCU grace period; doing it while bwrap builds
its namespaces hides most of that wait from the cold start (docs/sandbox.md, Measured), and
nothing inside can fork outside the quotas.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.bwrap import args as bwrap_args
from posttrain.sandbox.bwrap.runner import Namespace
from posttrain.sandbox.cgroups import Cgroup


SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin")
NSENTER = shutil.which("nsenter", path="/usr/bin:/bin")


def can_join_netns() -> bool:
    """Whether a bwrap can start inside another sandbox's network namespace: root, with
    nsenter to enter it and setpriv to drop to the sandbox's uid after."""
    return os.geteuid() == 0 and bool(NSENTER and SETPRIV)


class CgroupGone(SandboxError):
    """The groups a bwrap was to join were removed (a reaper saw them empty): open them
    again and retry."""


@dataclass
class Launcher:
    """What every bwrap of one sandbox shares."""

    bwrap: str
    root: Path
    network: str
    seccomp: bytes | None
    uid: int | None            # host uid to run as (None: our own)
    hidden: tuple[str, ...] = ()  # HIDE_GROUPS names (SandboxSpec.hidden)

    def spawn(self, command: list[str], mounts: dict[str, Path] | None,
              staged: tuple[str, ...], cgroup: Cgroup | None, areas: Path | None = None,
              netns: str | None = None, **popen) -> Namespace:
        """Start bwrap running `command`; it is inside `cgroup` before the command runs.
        `areas`: where its app/, tmp/ and logs/ come from (default: the sandbox's own);
        `netns`: a network namespace file it joins (needs root)."""
        info_r, info_w = os.pipe()
        fds = [info_w]
        extra = ["--info-fd", str(info_w)]
        if self.seccomp:
            sec_r, sec_w = os.pipe()
            os.write(sec_w, self.seccomp)
            os.close(sec_w)
            fds.append(sec_r)
            extra += ["--seccomp", str(sec_r)]
        sync_w = None
        if cgroup:
            sync_r, sync_w = os.pipe()
            fds.append(sync_r)
            extra += ["--block-fd", str(sync_r)]
        argv = bwrap_args.bwrap_argv(
            self.bwrap, self.root, network="join" if netns else self.network, workdir="/",
            env={"PATH": bwrap_args.BASE_PATH}, mounts=mounts, staged=staged, extra=extra,
            hidden=self.hidden, areas=areas)
        argv += ["--", *command]
        if self.uid is not None:
            argv = self._as_uid(argv, popen)
        if netns:
            argv = [NSENTER, f"--net={netns}", "--", *argv]
        try:
            ns = Namespace.spawn(argv, tuple(fds), info_w, info_r, env={}, **popen)
        finally:
            for fd in fds[1:]:
                os.close(fd)
        if sync_w is not None:
            _enter_cgroup(ns, cgroup, sync_w)
        return ns


    def _as_uid(self, argv: list[str], popen: dict) -> list[str]:
        """Run as self.uid: through setpriv when the host has it (Popen can then vfork,
        which starts faster from a large Python process), else Popen(user=...)."""
        if SETPRIV:
            return [SETPRIV, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                    *argv]
        popen.update(user=self.uid, group=self.uid, extra_groups=[])
        return argv


def _enter_cgroup(ns: Namespace, cgroup: Cgroup, sync_w: int) -> None:
    """Move bwrap and its namespace init into the groups, then let bwrap go on. Where
    that fails the command never runs outside the quotas: bwrap is killed, and the
    caller told (CgroupGone when the groups were removed meanwhile)."""
    try:
        pids = [ns.proc.pid, ns.wait_init_pid(timeout_s=10.0)]
        for procs in cgroup.procs_files():
            for pid in pids:
                with open(procs, "w") as f:
                    f.write(str(pid))
        os.write(sync_w, b"go\n")
    except (OSError, TypeError) as e:
        ns.kill()
        ns.close()
        if not cgroup.exists():
            raise CgroupGone(f"the sandbox's cgroups were removed as it started: {e}") from e
        raise SandboxError(f"could not start the command inside its cgroups: {e!r}") from e
    finally:
        os.close(sync_w)
