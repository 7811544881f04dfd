"""Quotas of one sandbox: the values in force, how each is enforced, and what stopped a command.

Memory, pids and CPU share go through the sandbox's cgroup when there is one, else
through rlimits set before each command (weaker: RLIMIT_AS counts address space, not
memory; RLIMIT_NPROC counts the host user's processes). CPU time is RLIMIT_CPU per
process. Disk is the size of the tmpfs that backs the writable areas when we may mount
one (root), else RLIMIT_FSIZE per file. Wall time and output are enforced by the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from posttrain.errors import SandboxError
from posttrain.sandbox.base import SandboxSpec
from posttrain.sandbox.bwrap import seccomp

DEFAULT_MEMORY_MB = 2048
DEFAULT_PIDS = 512
DEFAULT_DISK_MB = 2048


def host_memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


@dataclass
class Limits:
    """The quota values of one sandbox, with the backend's defaults filled in."""

    memory_mb: int
    pids: int
    disk_mb: int
    cpus: float | None
    cpu_time_s: int | None
    output_limit: int
    hard_output: int

    @classmethod
    def of(cls, spec: SandboxSpec) -> "Limits":
        memory = spec.memory_mb or DEFAULT_MEMORY_MB
        host = host_memory_mb()
        if host and memory > host:
            raise SandboxError(f"the sandbox asks for {memory} MB of memory but this host has "
                               f"{host} MB; lower memory_mb")
        for name in ("memory_mb", "pids", "disk_mb", "cpus", "cpu_time_s"):
            value = getattr(spec, name)
            if value is not None and value <= 0:
                raise SandboxError(f"{name} must be positive, got {value}")
        return cls(memory_mb=memory, pids=spec.pids or DEFAULT_PIDS,
                   disk_mb=spec.disk_mb or DEFAULT_DISK_MB, cpus=spec.cpus,
                   cpu_time_s=spec.cpu_time_s, output_limit=spec.output_limit,
                   hard_output=max(spec.output_hard_limit, spec.output_limit))

    def ulimits(self, cgroup, tmpfs: bool) -> list[str]:
        """`ulimit` flags for each command: the fallbacks for what no cgroup/tmpfs covers."""
        flags = ["-c 0"]
        if self.cpu_time_s:
            flags.append(f"-t {self.cpu_time_s}")
        if cgroup is None:
            flags += [f"-v {self.memory_mb * 1024}", f"-u {self.pids}"]
        if not tmpfs:
            flags.append(f"-f {self.disk_mb * 1024}")
        return flags

    def enforcement(self, cgroup, tmpfs: bool, seccomp_filter: bytes | None) -> dict[str, str]:
        """How each limit is enforced in this sandbox, in words (for logs, CLI and docs)."""
        cg = f"cgroup-{cgroup.version}" if cgroup else None
        return {
            "memory": f"{cg} {self.memory_mb} MB" if cg else
                      f"rlimit-as {self.memory_mb} MB (address space)",
            "pids": f"{cg} {self.pids}" if cg else f"rlimit-nproc {self.pids} (per host user)",
            "cpus": (f"{cg} {self.cpus}" if cg else "not limited") if self.cpus else "not limited",
            "cpu_time": f"rlimit-cpu {self.cpu_time_s} s/process" if self.cpu_time_s
                        else "not limited",
            "disk": f"tmpfs {self.disk_mb} MB" if tmpfs else
                    f"rlimit-fsize {self.disk_mb} MB per file",
            "wall": "host timer; the sandbox's pid namespace is killed",
            "output": f"{self.output_limit} B kept per stream; killed past {self.hard_output} B",
            "seccomp": f"deny-list of {len(seccomp.blocked_names())} calls" if seccomp_filter
                       else "off (filter is x86_64 only)",
        }


def killed_by(timed_out: bool, output_killed: bool, before: dict | None, after: dict | None,
              exit_code: int) -> str:
    """What stopped a command: the quota that held it. A fork bomb that hit the pids limit
    reports "pids" whether it then ended by itself or by the timeout (timed_out says which)."""
    hit = {k: bool(before and after and after[k] > before[k]) for k in ("oom_kill", "pids_max")}
    if hit["oom_kill"]:
        return "memory"
    if timed_out:
        return "pids" if hit["pids_max"] else "timeout"
    if output_killed:
        return "output"
    if hit["pids_max"]:
        return "pids"
    return "none"
