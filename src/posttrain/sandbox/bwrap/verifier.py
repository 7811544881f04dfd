"""The verifier's phase of a bwrap sandbox, out of reach of what the agent left running.

The verifier is a one-off bwrap with its own pid and mount namespaces, inside the runner's
network namespace (held open by an fd, so a survivor that ends the runner cannot take it
away), so servers the agent left still answer the tests. When the agent phase ends, /app,
/tmp and /logs are copied as they are into <root>/verify/, which only the verifier's bwrap
binds; its /logs/verifier starts empty. Processes the
agent left running (servers kept for the tests) see the old files, so nothing they write
later changes what the tests read or the reward they write. Regular files are copied
with their modes and times, without moving the source's atime (validate/reads.py traces
the verifier's reads by atime); sockets and FIFOs are hard links to the same inode, so a
server's Unix socket still answers the tests. Anything a survivor writes to its own
/logs/verifier meanwhile makes the run `tampered`. Without root (no way into the runner's
network) the verifier runs as Harbor runs it (Sandbox.run_verifier); so it does when nothing
the agent started is left running, since then nothing can interfere.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from pathlib import Path

from posttrain.sandbox import servers
from posttrain.sandbox.base import Sandbox, VerifierRun, fresh_dir
from posttrain.sandbox.bwrap import oneshot
from posttrain.sandbox.bwrap.launch import can_join_netns
from posttrain.sandbox.bwrap.runner import oldest_child
from posttrain.sandbox.hostdir import WRITABLE, chown_tree, sandbox_path

VIEW = "verify"


def run(sb, command: str, timeout_s: float, env: dict[str, str], tests: Path) -> VerifierRun:
    """Sandbox.run_verifier for a BwrapSandbox (sandbox.py)."""
    sb.stop_all_but_servers()
    if not _survivors(sb):      # nothing the agent started runs: the warm runner is safe, and
        drop(sb.root)           # it saves a bwrap and a copy of the files (docs/sandbox.md)
        return Sandbox.run_verifier(sb, command, timeout_s, env, tests)
    netns = _runner_netns(sb)
    if netns == -1:
        return Sandbox.run_verifier(sb, command, timeout_s, env, tests)
    files: list[Path] = []
    try:
        script = sb._script(command, env, files)
        files.append(sb.root / "ctl" / f"verify-{uuid.uuid4().hex[:8]}.sh")
        files[-1].write_text(script)
        agent_side = fresh_dir(sb.host_path("/logs/verifier"))
        sb.give(agent_side)
        areas = freeze(sb.root, sb.uid)
        result = oneshot.run(
            sb, f"/run/ctl/{files[-1].name}", timeout_s, {"/tests": tests}, areas=areas,
            netns=f"/proc/{os.getpid()}/fd/{netns}" if netns is not None else None)
    finally:
        if netns is not None and netns >= 0:
            os.close(netns)
        for file in files:
            file.unlink(missing_ok=True)
    found = intruders(agent_side)
    tampered = (f"while the tests ran, a process the agent left running wrote {found} to "
                "/logs/verifier") if found else ""
    return VerifierRun(result, areas / "logs" / "verifier", tampered)


def _runner_init(sb) -> int | None:
    """Host pid of the live runner's namespace init, or None."""
    runner = sb._runner
    return runner.ns.init_pid() if runner and runner.alive else None


def _survivors(sb) -> bool:
    """Whether any process the agent started still runs in the runner's namespace."""
    init = _runner_init(sb)
    return init is not None and bool(servers.left(servers.namespace_pids(init),
                                                  {init, *oldest_child(init)}))


def _runner_netns(sb) -> int | None:
    """An fd on the runner's network namespace; None when the verifier needs none (no
    runner, or the host network); -1 when one is needed but cannot be joined (not root)."""
    init = _runner_init(sb)
    if init is None or sb.spec.network == "public":
        return None
    if not can_join_netns():
        return -1
    try:
        return os.open(f"/proc/{init}/ns/net", os.O_RDONLY)
    except OSError:             # the runner ended just now: its servers went with it
        return None


def path(root: Path, sandbox_path_: str) -> Path:
    """The host file behind `sandbox_path_` as the last verifier run saw it."""
    frozen = root / VIEW
    return sandbox_path(frozen if frozen.is_dir() else root, sandbox_path_)


def freeze(root: Path, uid: int | None) -> Path:
    """<root>/verify/{app,tmp,logs} copied from the agent's, /logs/verifier empty."""
    view = fresh_dir(root / VIEW)
    for name in WRITABLE:
        _copy(root / name, view / name)
    fresh_dir(view / "logs" / "verifier")
    chown_tree(view, uid)
    return view


def drop(root: Path) -> None:
    shutil.rmtree(root / VIEW, ignore_errors=True)


def intruders(agent_side: Path) -> list[str]:
    """What appeared in the agent's /logs/verifier while the verifier ran: only a process
    the agent left running could write it, and only to forge a reward."""
    if agent_side.is_symlink() or not agent_side.is_dir():
        return [agent_side.name]
    return sorted(p.name for p in agent_side.iterdir())


def _copy(src: Path, dst: Path) -> None:
    st = os.lstat(src)
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(dst)
        for entry in os.scandir(src):
            _copy(Path(entry.path), dst / entry.name)
    elif stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        return
    elif stat.S_ISREG(st.st_mode):
        _copy_bytes(src, dst)
    else:                       # a socket or a FIFO: the same inode, so it still connects
        os.link(src, dst, follow_symlinks=False)
        return
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _copy_bytes(src: Path, dst: Path) -> None:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NOATIME)
    except PermissionError:     # O_NOATIME needs the file's owner or CAP_FOWNER
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as r, open(dst, "xb") as w:
        shutil.copyfileobj(r, w, 1 << 20)
