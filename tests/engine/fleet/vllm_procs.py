"""Processes of the slow vLLM tests' runs: server process groups, what is alive in them, staged weights.

A module of its own, not conftest.py: a test module importing `conftest` gets whichever
conftest.py pytest loaded last when several directories run in one session."""

import json
from pathlib import Path


def server_groups(run_dir: Path) -> set[int]:
    """Process groups of the run's engine servers: each watchdog's child leads one."""
    groups = set()
    for server in json.loads((run_dir / "engines" / "servers.json").read_text()):
        pid = server["watchdog_pid"]
        groups |= {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    return groups


def alive_in(groups: set[int]) -> list[int]:
    """Pids of live (not zombie) processes in any of these process groups."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) in groups:
            out.append(int(d.name))
    return out


def staged_dirs() -> set[str]:
    from posttrain.engine.clients.weight_files import shm_root

    return {p.name for p in shm_root().glob("posttrain-vllm-weights-*")}
