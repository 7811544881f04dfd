"""One host package made ready for mutation: unpacked, its tests' baseline, its hidden cases.

`prepare` fetches the pinned wheels, unpacks the host into a scratch directory, runs each
covered module's tests and doctests with the verifier's own pytest (the same runner the
sandbox uses, so test ids and outcomes match), and builds differential cases: calls the
tests make with literal arguments, plus perturbed copies (integers +-1, sequences
reversed, shortened, extended), each kept only if the pristine function gives the same
outcome in two separate processes (set order and hashing cannot make it flaky).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.tasks.suites.code import grade as code_grade
from posttrain.tasks.suites.code import pypi

MAX_CASES = 16
# A mutant's test run longer than this many times the slowest pristine run (and the floor)
# is a hang (a mutated loop bound that never ends): rejected like any run without a report.
SCREEN_FACTOR, SCREEN_FLOOR_S, SCREEN_CAP_S = 20, 30.0, 300.0


def sandbox_python() -> str:
    """The interpreter the verifier will use inside the sandbox (the host's system python)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


@dataclass
class Prepared:
    host: pypi.Host
    root: Path                                   # the pristine unpacked tree
    wheels: list[Path]                           # the verifier's pytest zips
    sources: list[str]                           # library files the agent may change
    tests: list[str]                             # test files (relative to root)
    baseline: dict[str, dict[str, str]] = field(default_factory=dict)   # module -> outcomes
    cases: dict[str, list[dict]] = field(default_factory=dict)          # "mod:func" -> cases
    python: str = ""
    screen_timeout_s: float = SCREEN_CAP_S       # each mutant's test run (pick.screen)

    def cleanup(self) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)


def module_name(rel: str) -> str:
    return rel[:-3].replace("/", ".")


def functions_of(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]


def _tree_files(root: Path, packages: tuple[str, ...]) -> tuple[list[str], list[str]]:
    sources, tests = [], []
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            (tests if "/tests/" in f"/{rel}" else sources).append(rel)
    return sources, tests


def run_tests(prep: Prepared, work: Path, module: str,
              timeout: float = SCREEN_CAP_S) -> dict[str, str]:
    """Outcomes of module's test file and doctests, run in the tree at work."""
    targets = [prep.host.modules[module], module]
    return code_grade.run_pytest(prep.python, str(work), [str(w) for w in prep.wheels], targets,
                                 timeout=timeout)


def _record(prep: Prepared, module: str, scratch: Path) -> dict[str, list[list[str]]]:
    funcs = functions_of((prep.root / module).read_text())
    spec = {"wheels": [str(w) for w in prep.wheels], "work": str(prep.root),
            "functions": [f"{module_name(module)}:{f}" for f in funcs],
            "targets": [prep.host.modules[module]], "ini": str(scratch / "pytest.ini"),
            "out": str(scratch / "calls.json")}
    (scratch / "pytest.ini").write_text("[pytest]\n")
    (scratch / "spec.json").write_text(json.dumps(spec))
    script = Path(__file__).with_name("record.py")
    subprocess.run([prep.python, "-I", str(script), str(scratch / "spec.json")], cwd=prep.root,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300,
                   env={"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    path = scratch / "calls.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _variants(args: tuple, kwargs: dict) -> list[tuple[tuple, dict]]:
    out = []
    for i, v in enumerate(args):
        alts = []
        if type(v) is int:
            alts = [v + 1, v - 1]
        elif type(v) in (list, tuple) and v:
            alts = [v[::-1], v[:-1], v + v[-1:]]
        elif type(v) is str and len(v) > 1:
            alts = [v[::-1]]
        out += [(args[:i] + (a,) + args[i + 1:], kwargs) for a in alts]
    return out


def _candidate_cases(qual: str, calls: list[list[str]]) -> list[dict]:
    seen: dict[tuple[str, str], None] = {}
    for a, k in calls:
        seen.setdefault((a, k))
    for a, k in list(seen)[:8]:
        for va, vk in _variants(ast.literal_eval(a), ast.literal_eval(k)):
            seen.setdefault((repr(va), repr(vk)))
    return [{"func": qual, "args": a, "kwargs": k} for a, k in list(seen)[:3 * MAX_CASES]]


def _stable_cases(prep: Prepared, cases: list[dict], scratch: Path) -> list[dict]:
    """Cases whose pristine outcome is the same in two processes, with that outcome."""
    first = code_grade.run_cases(prep.python, str(prep.root), cases, timeout=60)
    second = code_grade.run_cases(prep.python, str(prep.root), cases, timeout=60)
    if not first or first != second:
        keep = [c | {"expect": a} for c, a, b in zip(cases, first, second) if a == b]
    else:
        keep = [c | {"expect": a} for c, a in zip(cases, first)]
    keep = [c for c in keep if "RecursionError" not in c["expect"]]
    return keep[:MAX_CASES]


def prepare(host: pypi.Host, cache: Path | None = None) -> Prepared:
    """Fetch (or reuse the cached) wheels and compute baselines and cases; may raise
    PosttrainError (nothing has been written to the output yet)."""
    wheel = pypi.fetch(host.wheel, cache)
    wheels = [pypi.fetch(w, cache) for w in pypi.PYTEST_WHEELS]
    scratch = Path(tempfile.mkdtemp(prefix="posttrain-code-"))
    root = pypi.unpack(wheel, scratch / "pristine")
    for p in root.glob("*.dist-info"):
        shutil.rmtree(p)
    sources, tests = _tree_files(root, (host.package, *host.extra_packages))
    prep = Prepared(host, root, wheels, sources, tests, python=sandbox_python())
    slowest = 0.0
    try:
        for module in host.modules:
            t0 = time.monotonic()
            prep.baseline[module] = run_tests(prep, root, module)
            slowest = max(slowest, time.monotonic() - t0)
            calls = _record(prep, module, scratch)
            for qual, got in sorted(calls.items()):
                cases = _candidate_cases(qual, got)
                stable = _stable_cases(prep, cases, scratch) if cases else []
                if stable:
                    prep.cases[qual] = stable
        _clean_bytecode(root)
        prep.screen_timeout_s = min(SCREEN_CAP_S, max(SCREEN_FLOOR_S, SCREEN_FACTOR * slowest))
    except BaseException:
        prep.cleanup()
        raise
    return prep


def _clean_bytecode(root: Path) -> None:
    for p in root.rglob("__pycache__"):
        shutil.rmtree(p, ignore_errors=True)
