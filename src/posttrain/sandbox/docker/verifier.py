"""The verifier's phase in a container: a user the agent's processes are not.

The servers the agent left share the container with the tests, so the verifier runs as
another uid (a fresh random one, or root where the task asks), and the writable areas
/app, /tmp and /logs are handed to that uid for the phase: a survivor can no longer
create, change or rename anything there (only through a file it already holds open), nor
signal or ptrace the verifier. /logs/verifier starts empty and the verifier's own; a
file in it owned by anyone else makes the run `tampered`. Its result is copied out of the
container's reach before the areas go back to the agent's uid. A root agent keeps no
process into the phase: nothing can be taken from root.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from posttrain.sandbox import hostdir
from posttrain.sandbox.base import Sandbox, VerifierRun, fresh_dir

OUTPUT = "verify-out"


def verifier_uid(agent_uid: int | None, as_root: bool) -> int:
    if as_root:
        return 0
    uid = agent_uid
    while uid == agent_uid:
        uid = hostdir.sandbox_host_uid()
    return uid


def run(sandbox, command: str, timeout_s: float, env: dict[str, str],
        tests: Path) -> VerifierRun:
    """Sandbox.run_verifier for a DockerSandbox (sandbox.py)."""
    if sandbox.as_root or sandbox.uid is None:      # no other uid to be: none may survive
        sandbox.stop_processes()
        return Sandbox.run_verifier(sandbox, command, timeout_s, env, tests)
    sandbox.stop_all_but_servers()
    uid = verifier_uid(sandbox.uid, sandbox.verifier_root)
    for area in hostdir.WRITABLE:
        hostdir.chown_tree(sandbox.root / area, uid)
    output = fresh_dir(sandbox.root / "logs" / "verifier")
    os.chown(output, uid, uid)
    staged = sandbox.staged_path("/tests")
    try:
        hostdir.stage_mount(staged, tests, uid)
        result = sandbox.run_as(command, timeout_s, env, f"{uid}:{uid}")
        tampered = _foreign(output, uid)
        kept = fresh_dir(sandbox.root / OUTPUT)
        if not tampered:
            shutil.copytree(output, kept, symlinks=True, dirs_exist_ok=True)
    finally:
        hostdir.clear_dir(staged)
        for area in hostdir.WRITABLE:
            hostdir.chown_tree(sandbox.root / area, sandbox.uid)
    return VerifierRun(result, kept, tampered)


def _foreign(output: Path, uid: int) -> str:
    """Why the result cannot be trusted: a file in it someone other than `uid` made."""
    if output.is_symlink() or not output.is_dir():
        return "/logs/verifier was replaced while the tests ran"
    strangers = sorted(p.name for p in output.rglob("*") if p.lstat().st_uid != uid)
    return (f"while the tests ran, another user wrote {strangers} to /logs/verifier"
            if strangers else "")
