"""The code suite's verifier: copied into each task as tests/grade.py and run in the sandbox.

Standard library only (it runs under the system python3 with -I). It copies the agent's
library sources (regular files only, never links, never its tests or conftest files)
into a fresh directory beside the pristine tests, screens what the agent changed, runs
the verifier's own pytest (zips in /tests/wheels) with conftest files, plugins and ini
files switched off, reads the results from pytest's JUnit XML report (never from log
text), and runs the hidden differential cases in a separate process. Generation uses
the same functions, so the tests' ids and outcomes match between the two.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET

# Names and attributes an honest fix never needs to introduce: I/O, processes, frames,
# the import system, the interpreter's and pytest's internals.
FORBIDDEN = frozenset((
    "open exec eval compile __import__ globals locals vars getattr setattr delattr breakpoint "
    "input exit quit _exit system popen spawn fork kill modules _getframe settrace setprofile "
    "atexit builtins __builtins__ importlib subprocess os sys inspect ctypes signal gc pytest "
    "_pytest io pathlib shutil __code__ __globals__ __subclasses__ __dict__ __loader__ __spec__ "
    "f_back f_globals f_locals tb_frame write unlink rmtree environ").split())
SUSPECT_STRINGS = ("/", "\\", "pytest", "PASSED", "passed", "xml", "tests", "junit")
RUNNER = ("import sys\nsys.path[:0] = sys.argv[1].split(':')\nimport pytest\n"
          "sys.exit(pytest.main(sys.argv[2:]))\n")


def features(source: str) -> dict:
    """What a module uses: imports, names, attributes and string constants."""
    tree = ast.parse(source)
    imports, names, strings = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imports |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
    return {"imports": sorted(imports), "names": sorted(names), "strings": sorted(strings)}


def screen(source: str, before: dict, allowed_imports: list[str]) -> list[str]:
    """Reasons to reject a changed module: new imports, forbidden names, suspect strings."""
    try:
        now = features(source)
    except (SyntaxError, ValueError) as e:
        return [f"does not parse: {e}"]
    reasons = []
    new_imports = set(now["imports"]) - set(before["imports"])
    bad = [i for i in new_imports if i.split(".")[0] not in allowed_imports]
    if bad:
        reasons.append(f"new imports {sorted(bad)}")
    names = (set(now["names"]) - set(before["names"])) & FORBIDDEN
    if names:
        reasons.append(f"new forbidden names {sorted(names)}")
    strings = [s for s in set(now["strings"]) - set(before["strings"])
               if any(t in s for t in SUSPECT_STRINGS)]
    if strings:
        reasons.append(f"new suspect strings {sorted(strings)[:3]}")
    return reasons


def parse_junit(path: str) -> dict[str, str]:
    """{test id: passed | failed | error | skipped} from pytest's JUnit XML."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        tags = {child.tag for child in case}
        outcome = ("error" if "error" in tags else "failed" if "failure" in tags
                   else "skipped" if "skipped" in tags else "passed")
        out.setdefault(tid, outcome)
    return out


def run_pytest(python: str, work: str, wheels: list[str], targets: list[str],
               timeout: float = 300.0) -> dict[str, str]:
    """Run the verifier's pytest on targets under work; {} if no report was written."""
    report = os.path.join(work, ".report.xml")
    ini = os.path.join(work, ".pytest.ini")
    with open(ini, "w") as f:
        f.write("[pytest]\n")
    args = ["-q", "-c", ini, "--rootdir", work, "-p", "no:cacheprovider", "--noconftest",
            "--doctest-modules", "-o", "junit_family=xunit1", f"--junitxml={report}", *targets]
    env = {"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "LANG": "C.UTF-8",
           "HOME": work}
    try:
        subprocess.run([python, "-I", "-c", RUNNER, ":".join([*wheels, work]), *args], cwd=work,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=timeout)
    except subprocess.TimeoutExpired:
        return {}
    finally:
        os.unlink(ini)
    if not os.path.isfile(report):
        return {}
    try:
        return parse_junit(report)
    except ET.ParseError:
        return {}
    finally:
        os.unlink(report)       # generation runs in the tree the agent will get


def normalize(value, depth: int = 0):
    """A comparable, order-stable form of a result (iterators drained, sets sorted)."""
    if depth > 6:
        return "..."
    if isinstance(value, (set, frozenset)):
        return ["<set>", sorted(repr(normalize(v, depth + 1)) for v in value)]
    if isinstance(value, dict):
        return {json.dumps(normalize(k, depth + 1), sort_keys=True): normalize(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [normalize(v, depth + 1) for v in value]]
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return repr(value)
    if hasattr(value, "__next__"):
        return ["<iter>", [normalize(v, depth + 1) for v in itertools.islice(value, 200)]]
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


def eval_cases(cases: list[dict]) -> list[str]:
    """Each case's outcome, as text: the normalized result or the exception's type."""
    import importlib

    out = []
    for case in cases:
        module, _, name = case["func"].partition(":")
        try:
            func = getattr(importlib.import_module(module), name)
            result = func(*ast.literal_eval(case["args"]), **ast.literal_eval(case["kwargs"]))
            out.append(json.dumps(normalize(result), sort_keys=True))
        except Exception as e:          # noqa: BLE001 - the outcome is the exception type
            out.append(f"raises {type(e).__name__}")
    return out


def run_cases(python: str, work: str, cases: list[dict], timeout: float = 120.0) -> list[str]:
    """eval_cases in a child process with only work on its path; [] if it fails."""
    if not cases:
        return []
    path = os.path.join(work, ".cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    try:
        r = subprocess.run([python, "-I", os.path.abspath(__file__), "--eval", work, path],
                           cwd=work, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                           capture_output=True, text=True, timeout=timeout)
        got = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else []
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return []
    finally:
        os.unlink(path)
    return got if isinstance(got, list) and len(got) == len(cases) else []


def copy_sources(repo: str, work: str, sources: list[str]) -> list[str]:
    """Copy the listed files from the agent's repo as fresh regular files; missing ones named."""
    missing = []
    for rel in sources:
        src, dst = os.path.join(repo, rel), os.path.join(work, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise OSError("not a regular file")
                data = f.read(4_000_000)
            with open(dst, "wb") as f:
                f.write(data)
        except OSError:
            missing.append(rel)
    return missing


def judge(spec: dict, outcomes: dict[str, str], got: list[str]) -> dict:
    """The reward and its parts from test outcomes and differential results."""
    f2p = [t for t in spec["f2p"] if outcomes.get(t) == "passed"]
    p2p = [t for t in spec["p2p"] if outcomes.get(t) == "passed"]
    expect = [c["expect"] for c in spec["cases"]]
    diff = sum(a == b for a, b in zip(got, expect)) if got else 0
    parts = {"f2p_passed": len(f2p), "f2p_total": len(spec["f2p"]), "p2p_passed": len(p2p),
             "p2p_total": len(spec["p2p"]), "diff_passed": diff, "diff_total": len(expect)}
    if spec["mode"] == "scratch":       # the share of hidden tests, if nothing else broke
        reward = len(f2p) / max(1, len(spec["f2p"])) if len(p2p) == len(spec["p2p"]) else 0.0
    else:
        reward = float(len(f2p) == len(spec["f2p"]) and len(p2p) == len(spec["p2p"])
                       and diff == len(expect))
    return {"reward": reward, **parts}


def grade(spec: dict, tests_dir: str, python: str = "/usr/bin/python3") -> dict:
    """Everything the verifier does, on the agent's repo; returns the reward.json content."""
    work = tempfile.mkdtemp(prefix="grade-")
    try:
        with tarfile.open(os.path.join(tests_dir, "pristine.tar.gz")) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and not m.name.startswith("/")
                       and ".." not in m.name.split("/")]
            tar.extractall(work, members=members)   # our own archive; no `filter` before 3.11.4
        missing = copy_sources(spec["repo"], work, spec["sources"])
        reasons = [f"missing or not a regular file: {m}" for m in missing[:3]]
        for rel, before in spec["features"].items():
            path = os.path.join(work, rel)
            if rel not in missing and os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    reasons += [f"{rel}: {r}" for r in screen(f.read(), before, spec["allowed_imports"])]
        if reasons:
            return {"reward": 0.0, "screen_failed": 1.0, "why": reasons[:6]}
        wheels = [os.path.join(tests_dir, "wheels", w) for w in spec["wheels"]]
        outcomes = run_pytest(python, work, wheels, spec["targets"])
        got = run_cases(python, work, spec["cases"])
        return judge(spec, outcomes, got) | {"report_found": float(bool(outcomes))}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--eval"]:
        sys.path.insert(0, argv[1])
        with open(argv[2]) as f:
            print(json.dumps(eval_cases(json.load(f))))
        return 0
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(tests_dir, "grade.json")) as f:
        spec = json.load(f)
    result = grade(spec, tests_dir)
    os.makedirs("/logs/verifier", exist_ok=True)
    with open("/logs/verifier/reward.json", "w") as f:
        json.dump({k: v for k, v in result.items() if isinstance(v, float)}, f)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
