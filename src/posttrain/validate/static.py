"""Static hygiene: checks that read the task directory and run nothing.

Malformed input (bad TOML, missing files, binary instruction, symlinks leaving the
task, huge files) is found here and makes the task `broken` with a one-line reason,
so a bad task never reaches a sandbox and never stops the run.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from posttrain.errors import TaskError
from posttrain.sandbox.environment import parse_dockerfile
from posttrain.tasks import Task, read_task
from posttrain.validate.config import ValidateConfig
from posttrain.validate.record import Check

MB = 1024 * 1024
REWARD_RE = re.compile(r"/logs/verifier/reward\.(txt|json)|reward\.(txt|json)")
PIP_RE = re.compile(r"\bpip3?\s+install\s+([^\n;&|]+)")
SET_E_RE = re.compile(r"^\s*set\s+-[a-z]*e", re.M)


def scan_tree(root: Path, cfg: ValidateConfig) -> list[str]:
    """Problems with the files themselves: links leaving the task, oversized files."""
    problems, total, count = [], 0, 0
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):   # never follows directory links
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            count += 1
            if count > cfg.max_files:
                return problems + [f"more than {cfg.max_files} files"]
            if p.is_symlink():
                target = (p.parent / os.readlink(p)).resolve()
                if real_root not in (target, *target.parents):
                    problems.append(f"symlink {p.relative_to(root)} -> {os.readlink(p)} "
                                    "points outside the task directory")
                continue
            size = p.lstat().st_size if p.is_file() else 0
            total += size
            if size > cfg.max_file_mb * MB:
                problems.append(f"{p.relative_to(root)} is {size / MB:.1f} MB "
                                f"(limit {cfg.max_file_mb:g} MB per file)")
    if total > cfg.max_task_mb * MB:
        problems.append(f"task directory holds {total / MB:.1f} MB (limit {cfg.max_task_mb:g} MB)")
    return problems


def looks_binary(path: Path) -> bool:
    head = path.read_bytes()[:8192]
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 13))
    return bool(head) and control / len(head) > 0.05


def load_task(root: Path, cfg: ValidateConfig) -> tuple[Task | None, Check]:
    """Read the task; the `static` check says why it is unusable if it is."""
    problems = scan_tree(root, cfg)
    inst = root / "instruction.md"
    if inst.is_file() and not inst.is_symlink() and looks_binary(inst):
        problems.append("instruction.md is binary, not text")
    task = None
    if not problems:
        try:
            task = read_task(root)
        except TaskError as e:
            problems.append(str(e).replace(f"{root}/", "").replace(f"{root}: ", ""))
    if task is not None:
        problems += _script_problems(task)
    evidence = {"warnings": _warnings(task)} if task is not None else {}
    if problems:
        return (None, Check("static", False, "broken", "; ".join(problems),
                            {"problems": problems, **evidence}))
    return task, Check("static", True, evidence=evidence)


def _reply_problems(task: Task) -> list[str]:
    """A single-turn task needs its oracle reply and a domain that scores replies."""
    from posttrain.errors import PosttrainError
    from posttrain.tasks.suites import score_reply

    if not (task.solution_dir / "reply.md").is_file():
        return ["missing solution/reply.md: no oracle reply, so the task cannot be validated"]
    try:
        score_reply(task.config.metadata, "")
    except (PosttrainError, KeyError, TypeError) as e:
        return [f"the reply cannot be scored: {e}"]
    return []


def _script_problems(task: Task) -> list[str]:
    if task.single_turn:
        return _reply_problems(task)
    problems = []
    if not (task.solution_dir / "solve.sh").is_file():
        problems.append("missing solution/solve.sh: no oracle, so the task cannot be validated")
    test_sh = (task.tests_dir / "test.sh").read_text(encoding="utf-8", errors="replace")
    if not REWARD_RE.search(_all_tests_text(task) or test_sh):
        problems.append("tests never write /logs/verifier/reward.txt or reward.json")
    return problems


def _warnings(task: Task) -> list[str]:
    if task.single_turn:
        return [] if task.config.metadata.get("difficulty") is not None else ["no metadata.difficulty"]
    test_sh = (task.tests_dir / "test.sh").read_text(encoding="utf-8", errors="replace")
    out = []
    if SET_E_RE.search(test_sh) and "trap" not in test_sh:
        out.append("test.sh uses `set -e` without a trap: a failing step may exit before "
                   "the reward is written")
    if task.config.metadata.get("difficulty") is None:
        out.append("no metadata.difficulty")
    if not re.search(r"(^|\s|`)/\w", task.instruction):
        out.append("the instruction names no absolute path (agents guess the working dir)")
    for m in PIP_RE.finditer(_all_tests_text(task)):
        unpinned = [w for w in m.group(1).split() if not w.startswith("-") and "==" not in w]
        if unpinned:
            out.append(f"tests install unpinned Python packages: {' '.join(unpinned[:4])}")
    return out


def _all_tests_text(task: Task, limit: int = 2 * MB) -> str:
    parts = []
    for p in sorted(task.tests_dir.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.stat().st_size < limit:
            parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def _digests(root: Path) -> dict[str, str]:
    out = {}
    for p in root.rglob("*") if root.is_dir() else []:
        if p.is_file() and not p.is_symlink() and 0 < p.stat().st_size < MB:
            out[hashlib.sha256(p.read_bytes()).hexdigest()] = str(p.relative_to(root.parent))
    return out


def leak_check(task: Task) -> Check:
    """tests/ and solution/ must not be reachable from environment/ (the agent's world)."""
    env = task.environment_dir
    found = []
    dockerfile = env / "Dockerfile"
    if dockerfile.is_file():
        for word, args in parse_dockerfile(dockerfile.read_text(errors="replace")):
            if word in ("COPY", "ADD") and re.search(r"(^|[\s/\"])\.\.(/|\s|\"|$)", args):
                found.append(f"Dockerfile: {word} {args}")
    for p in env.rglob("*") if env.is_dir() else []:
        if p.is_symlink():
            target = (p.parent / os.readlink(p)).resolve()
            if env.resolve() not in (target, *target.parents):
                found.append(f"environment link {p.relative_to(task.path)} -> {os.readlink(p)}")
    secret = _digests(task.tests_dir) | _digests(task.solution_dir)
    for digest, rel in _digests(env).items():
        if digest in secret:
            found.append(f"{rel} is a copy of {secret[digest]}")
    if found:
        return Check("leaks", False, "hackable", "tests or solution reachable from environment/: "
                     + "; ".join(found[:3]), {"found": found})
    return Check("leaks", True)
