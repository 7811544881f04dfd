"""One command in a DockerSandbox's container (sandbox.py) through `docker exec`: its output
captured to the deadline and the output limits, and what stopped it (timeout, output, or the
cgroup's memory or pids limit)."""

from __future__ import annotations

import subprocess
import time

from posttrain.sandbox.capture import capture
from posttrain.types import ExecResult


def run(sb, command: str, timeout_s: float, env: dict[str, str] | None, user: str) -> ExecResult:
    """`command` as a bash script on stdin (any length, no argv limit), as `user`; a timeout or
    an output flood kills every process but init, and so does a limit the cgroup saw hit."""
    argv = [sb.cli, "exec", "-i", "-w", sb.spec.workdir]
    argv += ["-u", user] + (["-e", "HOME=/root"] if user == "0:0" else [])
    for k, v in (env or {}).items():
        argv += ["-e", f"{k}={v}"]
    before = sb.cgroup.counters() if sb.cgroup else {}
    start = time.monotonic()
    proc = subprocess.Popen(argv + [sb.id, "bash", "-s"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(command.encode())     # a script of any length, no argv limit
    proc.stdin.close()
    got = capture({"stdout": proc.stdout.fileno(), "stderr": proc.stderr.fileno()},
                  deadline=start + timeout_s, limit=sb.spec.output_limit,
                  hard_limit=max(sb.spec.output_hard_limit, sb.spec.output_limit),
                  kill=sb.stop_processes, done=lambda: proc.poll() is not None)
    proc.stdout.close()          # the client may still hold output the engine buffered:
    proc.stderr.close()          # closed pipes make it exit instead of blocking on them
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    killed = "timeout" if got.timed_out else "output" if got.output_killed else "none"
    if killed == "none" and sb.cgroup:
        killed = sb.cgroup.what_killed(before)
        if killed != "none":      # as bwrap: a limit hit takes every process with it
            sb.stop_processes()
    code = 137 if got.timed_out or got.output_killed else proc.returncode
    return ExecResult(exit_code=code, stdout=got.text("stdout"), stderr=got.text("stderr"),
                      duration_s=time.monotonic() - start, timed_out=got.timed_out,
                      truncated=got.truncated, killed_by=killed)
