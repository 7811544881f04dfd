"""One attempt at a task in a fresh sandbox: an agent script or the oracle, then the verifier.

The host reads /app and /tmp through the sandbox's host path to see what the oracle
changed (and, traced, which of those files the verifier read: validate/reads.py); it
walks without following links and writes with O_NOFOLLOW, so a link the task planted
never leads the host outside the sandbox.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from posttrain.agent.trial import open_task_sandbox, verify
from posttrain.sandbox import Sandbox
from posttrain.tasks import Task
from posttrain.validate import reads
from posttrain.validate.config import ValidateConfig

Snapshot = dict[str, str]   # path under /app or /tmp -> "d" for a dir, else a digest of the file
AREAS = ("/app", "/tmp")
Hook = Callable[[Sandbox, "Attempt"], object]


@dataclass
class Attempt:
    rewards: list[float] = field(default_factory=list)   # one per verifier run
    statuses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    agent_exit: int | None = None
    agent_timed_out: bool = False
    before: Snapshot = field(default_factory=dict)
    after: Snapshot = field(default_factory=dict)
    extra: object = None
    reads: list[str] | None = None   # traced: changed files the first verifier run read
    agent_tail: str = ""          # the last lines of the agent's (or oracle's) output
    verifier_tail: str = ""       # and of the first verifier run's


    @property
    def reward(self) -> float:
        return self.rewards[0] if self.rewards else 0.0

    @property
    def status(self) -> str:
        return self.statuses[0] if self.statuses else "not_run"


def snapshot(sandbox: Sandbox) -> Snapshot:
    out: Snapshot = {}
    for area in AREAS:
        out.update(_walk(sandbox.host_path(area), area))
    return out


def changed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """Regular files (not links, not huge) the agent created or changed."""
    return [p for p, d in after.items() if before.get(p) != d and d != "d"
            and not d.startswith(("l:", "big:"))]


def _walk(root: Path, area: str) -> Snapshot:
    out: Snapshot = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(top) / name
            rel = f"{area}/{p.relative_to(root)}"
            st = p.lstat()
            if p.is_symlink():
                out[rel] = "l:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "d"
            elif st.st_size <= 4_000_000:
                out[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
            else:
                out[rel] = f"big:{st.st_size}:{st.st_mtime_ns}"
    return out


def tail(result, lines: int = 15) -> str:
    """The last lines of a command's stdout and stderr together."""
    if result is None:
        return ""
    text = (result.stdout or "") + (result.stderr or "")
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_oracle_script(task: Task, sandbox: Sandbox, solution_dir: Path | None = None):
    return sandbox.exec("bash /solution/solve.sh", timeout_s=float(task.config.agent.timeout_sec),
                        env=dict(task.config.solution.env),
                        mounts={"/solution": solution_dir or task.solution_dir})


def attempt(task: Task, cfg: ValidateConfig, *, script: str | None = None, oracle: bool = False,
            solution_dir: Path | None = None, verifies: int = 1, track: bool = False,
            trace: bool = False, before_agent: Hook | None = None,
            after_agent: Hook | None = None) -> Attempt:
    """Run the oracle (or `script` as the agent) between the two hooks, then verify
    `verifies` times. `track` snapshots /app and /tmp before and after the agent; `trace`
    (with track) also records which changed files the first verifier run reads."""
    out = Attempt()
    with open_task_sandbox(task, cfg.backend) as sandbox:
        if track:
            out.before = snapshot(sandbox)
        if before_agent is not None:
            out.extra = before_agent(sandbox, out)
        if oracle or solution_dir is not None:
            result = run_oracle_script(task, sandbox, solution_dir)
        else:
            result = sandbox.exec(script or "true", timeout_s=cfg.probe_timeout_s)
        out.agent_exit, out.agent_timed_out = result.exit_code, result.timed_out
        out.agent_tail = tail(result)
        if track:
            out.after = snapshot(sandbox)
        if after_agent is not None:
            out.extra = after_agent(sandbox, out)
        traced = reads.start(sandbox, changed_files(out.before, out.after)) if trace else None
        for _ in range(verifies):
            v = verify(task, sandbox)
            if not out.rewards:
                out.verifier_tail = tail(v.result)
                out.reads = reads.finish(sandbox, traced)
            out.rewards.append(v.reward)
            out.statuses.append(v.status)
            out.errors.append(v.error)
            if v.status == "verifier_timeout":    # repeating it would only wait again
                break
    return out
