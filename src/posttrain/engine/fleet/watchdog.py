"""`python -m posttrain.engine.fleet.watchdog PARENT_PID -- CMD...`: run CMD in a process group of its
own and kill that whole group when the parent dies, even by SIGKILL, or when told to stop.

An engine server (vLLM: API server, engine core, workers) is several processes; the parent's
death signal reaches none of them. This small process sits between the trainer and the
server, polls its parent, and on exit also removes the weight files the parent had staged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from posttrain.engine.clients.weight_files import remove_staged

POLL_S = 0.5
GRACE_S = 10.0


def kill_group(pgid: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM the group, then SIGKILL whatever is still there after grace_s."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    parent, cmd = int(argv[0]), argv[argv.index("--") + 1:]
    child = subprocess.Popen(cmd, start_new_session=True)  # its own group: killpg reaches all
    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop and child.poll() is None and os.getppid() == parent:
        time.sleep(POLL_S)
    kill_group(child.pid)
    child.wait()
    if os.getppid() != parent:  # the trainer died: nothing else will clean up after it
        remove_staged(parent)
    return child.returncode or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
