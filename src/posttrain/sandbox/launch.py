"""Start one bwrap for a sandbox: the pipes it needs, its uid, and its way into the cgroups.

bwrap reports its namespace init's pid on --info-fd, reads the seccomp program from
--seccomp, and with --block-fd waits (after setting up its mounts, before forking the
command) until we have moved it and its init into the sandbox's cgroups: migration is
slow on cgroup v1 (~5-10 ms), so it overlaps bwrap's own setup, and nothing inside can
fork outside the quotas.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from posttrain.sandbox import bwrap_args
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.runner import Namespace


@dataclass
class Launcher:
    """What every bwrap of one sandbox shares."""

    bwrap: str
    root: Path
    network: str
    seccomp: bytes | None
    uid: int | None            # host uid to run as (None: our own)

    def spawn(self, command: list[str], mounts: dict[str, Path] | None,
              staged: tuple[str, ...], cgroup: Cgroup | None, **popen) -> Namespace:
        """Start bwrap running `command`; it is inside `cgroup` before the command runs."""
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
            self.bwrap, self.root, network=self.network, workdir="/",
            env={"PATH": bwrap_args.BASE_PATH}, mounts=mounts, staged=staged, extra=extra)
        argv += ["--", *command]
        if self.uid is not None:
            popen.update(user=self.uid, group=self.uid, extra_groups=[])
        try:
            ns = Namespace.spawn(argv, tuple(fds), info_w, info_r, env={}, **popen)
        finally:
            for fd in fds[1:]:
                os.close(fd)
        if sync_w is not None:
            _enter_cgroup(ns, cgroup, sync_w)
        return ns


def _enter_cgroup(ns: Namespace, cgroup: Cgroup, sync_w: int) -> None:
    """Move bwrap and its namespace init into the groups, then let bwrap go on."""
    try:
        pids = [ns.proc.pid, ns.wait_init_pid(timeout_s=10.0)]
        for procs in cgroup.procs_files():
            for pid in pids:
                with open(procs, "w") as f:
                    f.write(str(pid))
        os.write(sync_w, b"go\n")
    except (OSError, TypeError):
        ns.kill()                # never run outside the quotas
    finally:
        os.close(sync_w)
