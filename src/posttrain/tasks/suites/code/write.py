"""Write one screened code bug as a Harbor task directory (instruction, repo, tests, oracle)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

from posttrain.tasks.config import TaskConfig
from posttrain.tasks.suites.code import files as code_files
from posttrain.tasks.suites.code import grade as code_grade
from posttrain.tasks.suites.code.host import Prepared, module_name
from posttrain.tasks.suites.code.mutate import KIND_WORDS
from posttrain.tasks.suites.code.pick import Bug
from posttrain.tasks.task import Task, write_task

DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n"
SCRATCH_IMPORTS = ["itertools", "functools", "operator", "collections", "heapq", "bisect", "math"]
DETAIL_RANK = {"pinpoint": 0, "symptom": 1, "vague": 2}


def readable(norm) -> str:
    """A Python-looking rendering of a normalized outcome (code_grade.normalize)."""
    if isinstance(norm, str):
        return norm
    if isinstance(norm, dict):
        return "{" + ", ".join(f"{readable(json.loads(k))}: {readable(v)}"
                               for k, v in norm.items()) + "}"
    tag, items = norm
    inner = ", ".join(readable(v) for v in items)
    if tag == "tuple":
        return f"({inner}{',' if len(items) == 1 else ''})"
    if tag == "<set>":
        return "{" + ", ".join(items) + "}" if items else "set()"
    return f"an iterator over [{inner}]" if tag == "<iter>" else f"[{inner}]"


def outcome_text(expect: str) -> str:
    return expect if expect.startswith("raises ") else readable(json.loads(expect))


def call_text(case: dict) -> str:
    args = ast.literal_eval(case["args"])
    kwargs = ast.literal_eval(case["kwargs"])
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{case['func'].split(':')[1]}({', '.join(parts)})"


def distance(prep: Prepared, bug: Bug) -> str:
    """direct if a failing test (or doctest) names a mutated function, else indirect."""
    tree = ast.parse((prep.root / prep.host.modules[bug.module]).read_text())
    bodies = {n.name: ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for t in bug.f2p:
        name = t.split("::")[1].split("[")[0]
        text = bodies.get(name, name)
        if any(f in text for f in bug.functions):
            return "direct"
    return "indirect"


def issue(prep: Prepared, bug: Bug, detail: str) -> str:
    tmod = module_name(prep.host.modules[bug.module])
    example = next((t.split("::")[1] for t in bug.p2p if t.split("::")[0] == tmod
                    and "[" not in t), "test_...")
    mod, funcs = module_name(bug.module), ", ".join(f"`{f}`" for f in bug.functions)
    names = dict.fromkeys(t.split("::")[1] for t in bug.f2p if t.split("::")[0] != mod)
    tests = ", ".join(f"`{n}`" for n in list(names)[:4]) or "some doctests"
    examples = [f"`{call_text(c)}` gives {outcome_text(g)} but should give "
                f"{outcome_text(c['expect'])}." for c, g in bug.wrong[:2]]
    if bug.family == "scratch":
        head = f"The function(s) {funcs} in `{bug.module}` are not implemented (they raise " \
               "NotImplementedError). Implement them as their docstrings describe."
        if detail == "pinpoint":
            head += " For example: " + " ".join(
                f"`{call_text(c)}` should give {outcome_text(c['expect'])}." for c in bug.cases[:3])
        elif detail == "symptom":
            head += f" Hidden tests that check them include {tests}."
    elif detail == "pinpoint":
        kinds = " and ".join(sorted({KIND_WORDS[s.kind] for s in bug.sites}))
        head = (f"{funcs} in `{bug.module}` {'has' if len(bug.sites) == 1 else 'have'} a bug: "
                f"{kinds} was changed. " + " ".join(examples))
    elif detail == "symptom":
        head = (f"Some results of `{mod}` are wrong. The original tests {tests} fail "
                "(they are not in the repository). " + " ".join(examples[:1]))
    else:
        head = f"Something in `{mod}` returns wrong results since the last change. Find and fix it."
    return (f"{head.strip()}\n\nThe library ({prep.host.wheel.pin}) is in /app/repo, a git "
            "repository (`git diff` shows your changes). Change the library code, not the tests: "
            "your tree is tested with the original test suite, including tests that are not in "
            "the repository, and with hidden checks against the original behaviour. Changes "
            "that add imports or reach for files, processes, the interpreter or pytest score 0. "
            "pytest is not installed; the tests are plain functions, e.g. `cd /app/repo && "
            f"python3 -c 'from {tmod} import *; {example}()'`.\n")


def metadata(prep: Prepared, bug: Bug, detail: str) -> dict:
    dist = distance(prep, bug) if bug.family == "bugfix" else "direct"
    score = len(bug.sites) - 1 + DETAIL_RANK[detail] + (dist == "indirect")
    w = prep.host.wheel
    return {"domain": "code", "family": bug.family,
            "difficulty": "easy" if score == 0 else "medium" if score <= 2 else "hard",
            "host": w.name, "host_version": w.version, "licence": w.licence,
            "homepage": prep.host.homepage, "module": bug.module, "functions": bug.functions,
            "mutation_kinds": sorted({s.kind for s in bug.sites}),
            "mutation_count": len(bug.sites), "issue_detail": detail, "distance": dist,
            "f2p": len(bug.f2p), "p2p": len(bug.p2p), "diff_cases": len(bug.cases),
            "sandbox_hide": ["python-packages"], "multi_turn": True}


def grade_spec(prep: Prepared, bug: Bug, repo: Path) -> dict:
    return {"repo": "/app/repo", "mode": bug.family, "sources": prep.sources,
            "features": {s: code_grade.features((repo / s).read_text()) for s in prep.sources},
            "allowed_imports": SCRATCH_IMPORTS + [prep.host.package] if bug.family == "scratch" else [],
            "targets": [prep.host.modules[bug.module], bug.module], "f2p": bug.f2p,
            "p2p": bug.p2p, "cases": bug.cases if bug.family == "bugfix" else [],
            "wheels": [w.name for w in prep.wheels]}


def write(prep: Prepared, bug: Bug, task_id: str, detail: str, staging: Path,
          misses: list[tuple[str, str]] = ()) -> Task:
    text = issue(prep, bug, detail)
    config = TaskConfig.model_validate({
        "task": {"name": f"posttrain/code-{task_id}", "description": text.split("\n")[0][:200]},
        "metadata": metadata(prep, bug, detail),
        "agent": {"timeout_sec": 900.0}, "verifier": {"timeout_sec": 180.0},
        "environment": {"cpus": 1, "memory_mb": 1024, "network_mode": "no-network"}})
    pristine = (prep.root / bug.module).read_text()
    files = {"environment/Dockerfile": DOCKERFILE, "tests/test.sh": code_files.test_sh(),
             "tests/grade.py": Path(code_grade.__file__).read_text(),
             "solution/solve.sh": code_files.solve_sh(code_files.patch(bug.module, bug.source, pristine))}
    for name, source in misses:        # wrong fixes the verifier must reject (validate)
        files[f"solution/mutants/{name}.sh"] = code_files.solve_sh(
            code_files.patch(bug.module, bug.source, source))
    task = Task(id=task_id, instruction=text, config=config, path=Path(), files=files)
    path = write_task(task, staging)
    repo = path / "environment/app/repo"
    code_files.copy_tree(prep.root, repo)
    (repo / bug.module).write_text(bug.source)
    test_file = repo / prep.host.modules[bug.module]
    test_file.write_text(code_files.remove_tests(test_file.read_text(), bug.f2p))
    (path / "tests/grade.json").write_text(json.dumps(grade_spec(prep, bug, repo), indent=0) + "\n")
    code_files.make_repo(repo, f"{prep.host.wheel.pin}")
    (path / "tests/pristine.tar.gz").write_bytes(code_files.tar_gz(prep.root, prep.tests))
    (path / "tests/wheels").mkdir()
    for w in prep.wheels:
        shutil.copyfile(w, path / "tests/wheels" / w.name)
    task.path, task.files = path, {}
    return task
