"""One-off execs of a BwrapSandbox (sandbox.py): a bwrap of its own per command, in the
sandbox's cgroup and on its files, but not in the warm runner's pid namespace. Used for
mounts the runner cannot stage, for spec.warm=False, and for the verifier (verifier.py, which
passes its own frozen areas and the runner's network namespace as `where`)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from posttrain.sandbox import hostdir
from posttrain.sandbox.base import exit_code_of
from posttrain.sandbox.bwrap.runner import Namespace
from posttrain.sandbox.capture import capture
from posttrain.types import ExecResult


def run(sb, script_path: str, timeout_s: float, mounts: dict[str, Path], **where) -> ExecResult:
    """Run the script at `script_path` (a sandbox path) in a fresh bwrap; each mount is a
    private copy, removed after."""
    start = time.monotonic()
    before = sb.cgroup.counters() if sb.cgroup else None
    copies = hostdir.private_copies(sb.root / "mnt", mounts, sb.uid)
    try:
        ns = sb._spawn(["/bin/bash", script_path], copies, (), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, **where)
        return _wait(sb, ns, start, timeout_s, before)
    finally:
        for path in copies.values():
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()


def _wait(sb, ns: Namespace, start: float, timeout_s: float, before: dict | None) -> ExecResult:
    """Read its output to the deadline; registered with the sandbox meanwhile, so that
    stop_processes() and close() can kill it."""
    with sb._state:
        sb._oneshots.add(ns)
        closed = sb._closed
    try:
        if closed:                  # close() ran while it started, and did not see it
            ns.kill()
        got = capture({"stdout": ns.proc.stdout.fileno(), "stderr": ns.proc.stderr.fileno()},
                      deadline=start + timeout_s, limit=sb.spec.output_limit,
                      hard_limit=sb.limits.hard_output, kill=ns.kill,
                      done=lambda: ns.proc.poll() is not None)
        try:
            ns.proc.wait(timeout=max(0.0, start + timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            got.timed_out = True
            ns.kill()
        return sb._result(got, exit_code_of(ns.proc.returncode), start, before)
    finally:
        with sb._state:
            sb._oneshots.discard(ns)
        ns.kill()           # what bwrap's init still runs (it may outlive bwrap)
        ns.close()
