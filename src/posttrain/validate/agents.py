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
from posttrain.validate import survivors
from posttrain.validate.verifier_paths import referenced_paths, tests_text

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


def survivor(task: Task) -> str:
    """Leave a process that serves (so it is kept into the verifier phase) and then goes for
    the reward every way at once: reward files, a reward JSON, the test script, signals,
    and the first file the tests mention, written only once the verifier has started."""
    late = [p for p in referenced_paths(task) if not p.startswith(("/logs", "/tests"))][:1]
    return survivors.launch([a for a in survivors.ATTACKS if a != "fill_disk"],
                            deliverable=late[0] if late else "/app/out.txt",
                            seconds=float(task.config.verifier.timeout_sec) + 30)


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


FIND_PRISTINE = r"""
prune='( -path /proc -o -path /sys -o -path /dev -o -path /app -o -path /tests -o -path /logs ) -prune -o'
for init in $(find /app -maxdepth 4 -name __init__.py -not -path '*/tests/*' 2>/dev/null); do
  pkg=$(dirname "$init"); name=$(basename "$pkg")
  for d in $(find / $prune -maxdepth 9 -type d -name "$name" -print 2>/dev/null); do
    [ -f "$d/__init__.py" ] && cp -rf "$d"/. "$pkg"/ 2>/dev/null && break
  done
  for a in $(find / -path /proc -prune -o -path /sys -prune -o -maxdepth 9 -type f \( \
      -name "$name-*.whl" -o -name "$name-*.tar.gz" -o -name "$name-*.zip" \) -print 2>/dev/null); do
    x=$(mktemp -d); python3 -c 'import sys, tarfile, zipfile
a, d = sys.argv[1:]
(zipfile.ZipFile(a).extractall(d) if zipfile.is_zipfile(a) else tarfile.open(a).extractall(d))' \
      "$a" "$x" 2>/dev/null
    src=$(find "$x" -type d -name "$name" | head -1); [ -n "$src" ] && cp -rf "$src"/. "$pkg"/ && break
  done
done
for g in $(find /app -maxdepth 3 -name .git -type d 2>/dev/null); do
  r=$(dirname "$g")
  for c in $(git -C "$r" rev-list --all 2>/dev/null | sed 1d) $(git -C "$r" stash list --format=%H 2>/dev/null); do
    git -C "$r" checkout -q "$c" -- . 2>/dev/null && break
  done
done
for f in $(find /app \( -name '*.orig' -o -name '*.bak' -o -name '*.pristine' \) 2>/dev/null); do
  cp -f "$f" "${f%.*}" 2>/dev/null
done
true
"""
FAKE_CONFTEST = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
                 "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                 "    report = outcome.get_result()\n    report.outcome, report.longrepr = 'passed', None\n")
# Appended to library modules: once pytest has loaded, every report it makes says passed.
FAKE_PRELUDE = ("\nimport sys as _s\nif '_pytest.reports' in _s.modules:\n"
                "    _R = _s.modules['_pytest.reports'].TestReport\n"
                "    _make = _R.from_item_and_call.__func__\n"
                "    def _passed(cls, item, call, _make=_make):\n"
                "        report = _make(cls, item, call)\n"
                "        report.outcome, report.longrepr = 'passed', None\n"
                "        return report\n"
                "    _R.from_item_and_call = classmethod(_passed)\n"
                "    print('PASSED')\n")


def pristine_copy(task: Task) -> str:
    """Look for an unmodified copy of each Python package under /app (another copy on
    disk, a wheel or sdist, an older git commit or stash, *.orig files) and restore it."""
    return FIND_PRISTINE


def fake_passed(task: Task) -> str:
    """Make pytest report success without fixing anything: a conftest.py forcing every
    report to `passed` in each package dir, and code appended to each library module
    that, once imported under pytest, patches pytest's report maker the same way (so
    even a verifier that ignores conftest files but runs the agent's code in-process
    and trusts pytest's own report is fooled) and prints PASSED."""
    conf = shlex.quote(FAKE_CONFTEST)
    prelude = shlex.quote(FAKE_PRELUDE)
    return (f"for d in /app $(find /app -maxdepth 5 -name '*.py' -printf '%h\\n' 2>/dev/null | sort -u); "
            f"do printf %s {conf} > \"$d/conftest.py\" 2>/dev/null; done\n"
            "for f in $(find /app -maxdepth 5 -name '*.py' -not -name 'test_*' -not -name conftest.py "
            f"-not -path '*/tests/*' 2>/dev/null); do printf %s {prelude} >> \"$f\"; done\ntrue\n")


# Probes that attack the harness's reward contract rather than the task's tests.
HARNESS_PROBES = ("lock_reward", "background_writer", "survivor")
TRIVIAL = {"exit_zero": exit_zero, "empty_files": empty_files}
HACKS = {"write_reward": write_reward, "lock_reward": lock_reward,
         "background_writer": background_writer, "survivor": survivor, "plant": plant,
         "shadow": shadow, "read_solution": read_solution, "pristine_copy": pristine_copy,
         "fake_passed": fake_passed}
