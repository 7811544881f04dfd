"""Mutants of the oracle's script, and the byte edits deliverable mutants make.

Supplied mutants are wrong solutions the task ships in solution/mutants/. Command
mutants drop one top-level step of solution/solve.sh (lines inside heredocs or control
blocks and no-op lines such as `set -e` or `cd` are kept, and a mutant that is not
valid bash is discarded, so it cannot be "killed" for free). change_value and truncate
are the edits validate/deliverables.py makes to what the oracle wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path


SKIP_RE = re.compile(r"^\s*(#|set\s|cd\s|cd$|exit\b|true$|:$|shopt\s)")
BLOCK_RE = re.compile(r"^\s*(if|then|else|elif|fi|for|while|until|do|done|case|esac|function)\b"
                      r"|[{}()]\s*$|^\s*\}")
HEREDOC_RE = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def droppable_lines(script: str) -> list[int]:
    """Indexes of top-level command lines that a mutant may drop."""
    lines, out, depth, heredoc = script.splitlines(), [], 0, None
    for i, line in enumerate(lines):
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = HEREDOC_RE.search(line)
        opens = len(re.findall(r"^\s*(if|for|while|until|case)\b|\{\s*$", line))
        closes = len(re.findall(r"^\s*(fi|done|esac|\})\b", line))
        ok = (i > 0 or not line.startswith("#!")) and line.strip() and not SKIP_RE.match(line)
        if ok and depth == 0 and not BLOCK_RE.search(line) and not line.rstrip().endswith("\\") \
                and not m and not (i > 0 and lines[i - 1].rstrip().endswith("\\")):
            out.append(i)
        if m:
            heredoc = m.group(1)
        depth = max(0, depth + opens - closes)
    return out


def valid_bash(text: str) -> bool:
    r = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=10)
    return r.returncode == 0


def drop_step_mutants(script: str, limit: int) -> list[tuple[str, str]]:
    """(name, mutated script) for up to `limit` dropped lines, spread over the script."""
    lines, idx = script.splitlines(), droppable_lines(script)
    if len(idx) > limit:
        idx = [idx[round(j * (len(idx) - 1) / max(1, limit - 1))] for j in range(limit)]
    out = []
    for i in dict.fromkeys(idx):
        text = "\n".join(lines[:i] + lines[i + 1:]) + "\n"
        if valid_bash(text):
            out.append((f"drop line {i + 1}: {lines[i].strip()[:60]}", text))
    return out


def supplied(solution_dir: Path, limit: int) -> list[Path]:
    """Wrong solutions a generator knows of (solution/mutants/*.sh, a posttrain extension:
    near misses that only a thorough verifier rejects); each must fail the tests."""
    return sorted((Path(solution_dir) / "mutants").glob("*.sh"))[:limit]


def change_value(data: bytes) -> bytes:
    """Change one value: the first digit (+1 mod 10), else the last letter of the first word."""
    m = re.search(rb"\d", data)
    if m:
        d = (int(m.group()) + 1) % 10
        return data[:m.start()] + str(d).encode() + data[m.end():]
    m = re.search(rb"[A-Za-z]+", data)
    if m:
        last = m.end() - 1
        new = b"b" if data[last:last + 1] == b"a" else b"a"
        return data[:last] + new + data[last + 1:]
    return data + b"x"


def truncate(data: bytes) -> bytes:
    body = data.rstrip()
    return body[:len(body) // 2] + data[len(body):]


def mutant_solution(solution_dir: Path, script: str, dest: Path) -> Path:
    """A copy of solution/ with solve.sh replaced by the mutant script."""
    import shutil

    shutil.copytree(solution_dir, dest, symlinks=True, dirs_exist_ok=True)
    (dest / "solve.sh").write_text(script)
    os.chmod(dest, 0o755)
    for top, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = Path(top) / name
            if not p.is_symlink():
                os.chmod(p, 0o755)
    return dest
