"""Which processes of a sandbox serve, and stopping all the others.

Harbor and Terminal-Bench run the tests in the container the agent used, so a server the
agent or the oracle started in the background (`nohup python3 -m http.server 8000 &`)
must still answer when the verifier runs. A process serves when it holds a listening
socket: TCP listening, UDP bound, or a Unix socket accepting connections (read from
/proc/<pid>/net of its own network namespace). Every other leftover is killed before the
verifier, so a loop the agent left behind cannot rewrite the reward while the tests run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from posttrain.procs import kill_each

UNIX_ACCEPTING = 0x10000       # __SO_ACCEPTCON in /proc/net/unix's Flags column
TCP_LISTEN, UDP_BOUND = "0A", "07"


def _socket_inodes(pid: int) -> set[int]:
    out = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[8:-1]))
    return out


def _listening(pid: int) -> set[int]:
    """Inodes of the listening sockets in the network namespace of `pid`."""
    out = set()
    for name, state in (("tcp", TCP_LISTEN), ("tcp6", TCP_LISTEN), ("udp", UDP_BOUND),
                        ("udp6", UDP_BOUND)):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        out.update(int(f[9]) for f in map(str.split, lines) if len(f) > 9 and f[3] == state)
    try:
        lines = Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]
    except OSError:
        lines = []
    out.update(int(f[6]) for f in map(str.split, lines)
               if len(f) > 6 and int(f[3], 16) & UNIX_ACCEPTING)
    return out


def serving(pids: Iterable[int]) -> set[int]:
    """The pids among `pids` that hold a listening socket."""
    listening: dict[str, set[int]] = {}       # per network namespace
    out = set()
    for pid in pids:
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if netns not in listening:
            listening[netns] = _listening(pid)
        if _socket_inodes(pid) & listening[netns]:
            out.add(pid)
    return out


def _alive(pid: int) -> bool:
    """Not yet exited (a killed process stays a zombie until its parent reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def left(pids: Iterable[int], keep: set[int]) -> list[int]:
    """The pids still running, other than `keep`."""
    return [p for p in pids if p not in keep and _alive(p)]


def kill_all_but_servers(pids_of: Callable[[], Iterable[int]], keep: set[int],
                         timeout_s: float = 5.0) -> bool:
    """SIGKILL every pid from pids_of() that is neither kept nor serving, again until none
    is left (a fork in between is caught next round). False if that did not happen in time:
    the caller then stops everything."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rest = left(pids_of(), keep)
        victims = set(rest) - serving(rest)
        if not victims:
            return True
        kill_each(victims)
        time.sleep(0.005)
    return False


def namespace_pids(init_pid: int) -> list[int]:
    """Host pids in the pid namespace whose init is `init_pid` (the init included)."""
    try:
        ns = os.readlink(f"/proc/{init_pid}/ns/pid")
    except OSError:
        return []
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/ns/pid") == ns:
                    out.append(int(name))
            except OSError:
                pass
    return out
