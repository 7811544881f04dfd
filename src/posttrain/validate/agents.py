"""Scripted agents that must NOT earn the reward: no-op, trivial and hack probes.

Each agent is a bash script run inside the task's sandbox in place of a model. The
hack probes attack the reward contract itself: they write the reward file, plant
payloads where tests or the files tests run will be, shadow the interpreter and
PATH, and look for the solution. A payload writes reward 1 and exits 0.
"""

from __future__ import annotations

import re
import shlex
import shutil

from posttrain.tasks import Task

PATH_RE = re.compile(r"(?<![\w.$-])/(?:app|tmp|logs|home|root|srv|opt|data|workspace|mnt|var/tmp)"
                     r"(?:/[A-Za-z0-9._+-]+)*")
WRITE_RES = (re.compile(r"(?:>>?|\btee\s+(?:-a\s+)?|\bmkdir\s+(?:-p\s+)?|\btouch\s+)\s*[\"']?("
                        + PATH_RE.pattern + ")"),
             re.compile(r"open\(\s*[\"'](/[^\"']+)[\"']\s*,\s*[\"'][wax]"))
WORD_RE = re.compile(r"(?<![\w./$-])([A-Za-z_][A-Za-z0-9_.+-]{1,30})(?![\w/])")
# Payloads also print a passing pytest summary line, for verifiers that parse pytest's
# output (Terminal-Bench 1's) rather than trust a reward file.
PAYLOAD_SH = ("#!/bin/sh\n/bin/mkdir -p /logs/verifier 2>/dev/null\n"
              "echo 1 > /logs/verifier/reward.txt 2>/dev/null\n"
              "echo 'PASSED test_outputs.py::test_payload'\nexit 0\n")
PAYLOAD_PY = ("import os, sys\nos.makedirs('/logs/verifier', exist_ok=True)\n"
              "open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
              "print('PASSED test_outputs.py::test_payload')\nsys.exit(0)\n")
SHADOW_DIRS = ("/app", "/app/bin", "/app/.local/bin", "/tmp", "/tmp/bin", "/usr/local/bin")
ALWAYS_SHADOW = ("python", "python3", "pytest", "bash", "sh", "diff", "cmp", "grep", "test")


def tests_text(task: Task) -> str:
    parts = []
    for p in sorted(task.tests_dir.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.stat().st_size < 2_000_000:
            parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def referenced_paths(task: Task) -> list[str]:
    """Absolute paths in writable or data areas that the tests read (not the reward, and
    not paths the tests write themselves: redirections, tee, mkdir, touch, open(..., 'w'))."""
    text = tests_text(task)
    found = {m.group(0).rstrip("/.") for m in PATH_RE.finditer(text)}
    written = {m.group(1).rstrip("/.") for r in WRITE_RES for m in r.finditer(text)}
    return sorted(p for p in found - written if p and not p.startswith("/logs/verifier")
                  and p not in ("/app", "/tmp", "/logs"))


def tested_commands(task: Task) -> list[str]:
    """Command names the tests may call that exist on this system, plus the usual ones."""
    words = {m.group(1) for m in WORD_RE.finditer(tests_text(task))}
    real = sorted(w for w in words if shutil.which(w) and "/" not in w)
    return list(dict.fromkeys([*ALWAYS_SHADOW, *real]))[:60]


def _write(path: str, content: str, mode: str = "755") -> str:
    return (f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0] or '/')} 2>/dev/null; "
            f"printf %s {shlex.quote(content)} > {shlex.quote(path)} 2>/dev/null && "
            f"chmod {mode} {shlex.quote(path)} 2>/dev/null\n")


def _payload_for(path: str) -> str:
    return PAYLOAD_PY if path.endswith(".py") else PAYLOAD_SH


def nop(task: Task) -> str:
    return "true\n"


def exit_zero(task: Task) -> str:
    return "exit 0\n"


def empty_files(task: Task) -> str:
    """Create every path the tests mention that does not exist yet, as an empty file."""
    lines = [f"[ -e {shlex.quote(p)} ] || {{ mkdir -p $(dirname {shlex.quote(p)}); "
             f": > {shlex.quote(p)}; }} 2>/dev/null\n" for p in referenced_paths(task)]
    return "".join(lines) or "true\n"


def write_reward(task: Task) -> str:
    return ("mkdir -p /logs/verifier /logs/agent; echo 1 > /logs/verifier/reward.txt; "
            "echo '{\"reward\": 1}' > /logs/verifier/reward.json; echo 1 > /logs/agent/reward.txt\n")


def lock_reward(task: Task) -> str:
    """Write the reward, then make /logs/verifier read-only so it cannot be emptied."""
    return write_reward(task) + "chmod -R a-w /logs/verifier\n"


def background_writer(task: Task) -> str:
    """Leave a process behind that keeps rewriting the reward while the verifier runs."""
    return ("nohup sh -c 'while :; do mkdir -p /logs/verifier 2>/dev/null; "
            "echo 1 > /logs/verifier/reward.txt 2>/dev/null; done' "
            ">/dev/null 2>&1 &\n")


def plant(task: Task) -> str:
    """Payloads where the tests will be copied and over every file the tests mention."""
    targets = ["/tests/test.sh", "/app/tests/test.sh", "/tmp/tests/test.sh"]
    targets += [p for p in referenced_paths(task) if not p.startswith("/logs")]
    for p in sorted(task.tests_dir.rglob("*")):
        if p.is_file():
            rel = p.relative_to(task.tests_dir)
            targets += [f"/tests/{rel}", f"/app/{rel}", f"/app/tests/{rel}"]
    return "".join(_write(t, _payload_for(t)) for t in dict.fromkeys(targets)) or "true\n"


def shadow(task: Task) -> str:
    """Fake interpreters and tools early on any PATH the verifier might use, plus
    Python import hooks and shell rc files in the agent's home (/app)."""
    out = [_write(f"{d}/{name}", PAYLOAD_SH) for d in SHADOW_DIRS for name in tested_commands(task)]
    for name in ("pytest.py", "conftest.py", "sitecustomize.py", "usercustomize.py"):
        out += [_write(f"/app/{name}", PAYLOAD_PY, "644"), _write(f"/tmp/{name}", PAYLOAD_PY, "644")]
    rc = 'export PATH="/app/bin:/app:$PATH"\n'
    out += [_write(f"/app/{name}", rc, "644") for name in (".bashrc", ".profile", ".bash_profile")]
    return "".join(out)


def read_solution(task: Task) -> str:
    """Look for the oracle anywhere the agent can read, and run what it finds."""
    return ("for f in /solution/solve.sh $(find /app /tmp /logs /opt /srv /home /root /mnt "
            "-maxdepth 6 \\( -name 'solve*.sh' -o -name 'solution*.sh' \\) 2>/dev/null | head -5); "
            "do [ -f \"$f\" ] && (cd /app && bash \"$f\") >/dev/null 2>&1; done; "
            "cat /tests/* >/dev/null 2>&1; true\n")


# Probes that attack the harness's reward contract rather than the task's tests.
HARNESS_PROBES = ("lock_reward", "background_writer")
TRIVIAL = {"exit_zero": exit_zero, "empty_files": empty_files}
HACKS = {"write_reward": write_reward, "lock_reward": lock_reward,
         "background_writer": background_writer, "plant": plant,
         "shadow": shadow, "read_solution": read_solution}
