"""Deliberately defective tasks, one per kind, each with the status validation must give.

Every kind starts from one good task (sum the numbers in /app/input.txt into
/app/answer.txt) and breaks one thing. `python tests/validate/defective.py OUT`
writes them all, e.g. for `posttrain validate OUT`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

GOOD_CHECK = '[ "$(tr -d "[:space:]" < /app/answer.txt)" = "60" ]'
REWARD_EVERY_PATH = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
                     "if {check} 2>/dev/null; then echo 1 > /logs/verifier/reward.txt\n"
                     "else echo 0 > /logs/verifier/reward.txt; fi\n")
CHECK_SH = f"#!/bin/bash\n{GOOD_CHECK}\n"
CHECK_PY = ("import sys\ntry:\n    ok = open('/app/answer.txt').read().strip() == '60'\n"
            "except OSError:\n    ok = False\nsys.exit(0 if ok else 1)\n")


def base() -> dict[str, str | bytes]:
    return {
        "instruction.md": "Write the sum of the numbers in /app/input.txt to /app/answer.txt.\n",
        "task.toml": ('[metadata]\ndifficulty = "easy"\ncategory = "defective-fixture"\n'
                      "[agent]\ntimeout_sec = 30.0\n[verifier]\ntimeout_sec = 20.0\n"),
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n",
        "environment/app/input.txt": "10\n20\n30\n",
        "solution/solve.sh": ("#!/bin/bash\nset -e\ncd /app\n"
                              "awk '{s += $1} END {print s}' /app/input.txt > /app/answer.txt\n"),
        "tests/test.sh": REWARD_EVERY_PATH.format(check=GOOD_CHECK),
    }


def write_base_task(root: Path, name: str, files: dict) -> Path:
    """The good task with `files` changed, written under root/name (every file executable)."""
    for rel, text in (base() | files).items():
        p = root / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    return root / name


def _test(check: str) -> dict:
    return {"tests/test.sh": REWARD_EVERY_PATH.format(check=check)}


# kind -> (expected status, changes to the good task; None deletes a file)
KINDS: dict[str, tuple[str, dict]] = {
    "good": ("ok", {}),
    "wrong-oracle": ("broken", {"solution/solve.sh": "#!/bin/bash\necho 61 > /app/answer.txt\n"}),
    "tests-always-pass": ("hackable", {"tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                                       "echo 1 > /logs/verifier/reward.txt\n"}),
    "reads-unnamed-file": ("broken", {
        "solution/solve.sh": "#!/bin/bash\nawk '{s += $1} END {print s}' /app/input.txt > /app/total.out\n",
        **_test(GOOD_CHECK.replace("answer.txt", "total.out"))}),
    "reward-only-on-success": ("broken", {"tests/test.sh": (
        f"#!/bin/bash\nset -e\nmkdir -p /logs/verifier\n{GOOD_CHECK}\n"
        "echo 1 > /logs/verifier/reward.txt\n")}),
    "flaky-test": ("flaky", _test(f'[ $((RANDOM % 2)) = 0 ] && {GOOD_CHECK}')),
    "trusts-agent-writable-file": ("hackable", {
        "environment/app/check.sh": CHECK_SH, **_test("bash /app/check.sh")}),
    "fooled-by-empty-file": ("hackable", _test("[ -f /app/answer.txt ]")),
    "checks-format-not-value": ("weak-verifier", _test("grep -qxE '[0-9]+' /app/answer.txt")),
    "shadowable-interpreter": ("hackable", {
        "tests/check.py": CHECK_PY, **_test('(cd /app && PATH=".:$PATH" python3 /tests/check.py)')}),
    "nondeterministic-verifier": ("flaky", {"tests/test.sh": (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        f"if {GOOD_CHECK} 2>/dev/null; then echo 1 > /logs/verifier/reward.txt\n"
        "else printf '0.%04d\\n' $((RANDOM % 10000)) > /logs/verifier/reward.txt; fi\n")}),
    "solution-in-environment": ("hackable", {
        "environment/app/notes/solve.sh": base()["solution/solve.sh"]}),
    "verifier-timeout": ("broken", {
        "task.toml": "[agent]\ntimeout_sec = 30.0\n[verifier]\ntimeout_sec = 1.0\n",
        "tests/test.sh": "#!/bin/bash\nsleep 30\necho 1 > /logs/verifier/reward.txt\n"}),
    "non-numeric-reward": ("broken", {"tests/test.sh": (
        "#!/bin/bash\nmkdir -p /logs/verifier\necho yes > /logs/verifier/reward.txt\n")}),
    "needs-image-build": ("broken", {"environment/Dockerfile": (
        "FROM ubuntu:24.04\nRUN apt-get install -y jq\nWORKDIR /app\nCOPY app/ /app/\n")}),
    "no-oracle": ("broken", {"solution/solve.sh": None}),
    "empty-instruction": ("broken", {"instruction.md": "  \n"}),
    # malformed input
    "bad-toml": ("broken", {"task.toml": "[agent\ntimeout_sec = = 3\n"}),
    "missing-tests": ("broken", {"tests/test.sh": None}),
    "binary-instruction": ("broken", {"instruction.md": b"\x7fELF\x02\x01\x01\x00" + bytes(200)}),
    "symlink-out-of-task": ("broken", {"environment/app/passwd": ("symlink", "/etc/passwd")}),
    "huge-file": ("broken", {"environment/app/blob.bin": ("sparse", 100 * 1024 * 1024)}),
}


def write_kind(root: Path, kind: str) -> Path:
    files = base() | KINDS[kind][1]
    dest = Path(root) / kind
    for rel, content in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            continue
        if isinstance(content, tuple) and content[0] == "symlink":
            os.symlink(content[1], p)
        elif isinstance(content, tuple):
            with open(p, "wb") as f:
                f.truncate(content[1])
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
            if rel.endswith(".sh"):
                p.chmod(0o755)
    if not any((dest / "tests").iterdir()):
        (dest / "tests").rmdir()
    return dest


def write_all(root: Path, kinds=None) -> dict[str, str]:
    """Write every kind under root; returns kind -> expected status."""
    for kind in kinds or KINDS:
        write_kind(root, kind)
    return {k: KINDS[k][0] for k in kinds or KINDS}


if __name__ == "__main__":
    print(write_all(Path(sys.argv[1])))
