"""The code suite end to end (slow: it fetches toolz from PyPI once per session into a cache
and runs the real sandbox): generated tasks validate ok, every probe is caught on a
deliberately weakened copy, scripted partial agents grade between the probes and the
oracle, and the same seed gives the same files."""

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from posttrain.errors import PosttrainError
from posttrain.tasks import read_task
from posttrain.tasks.suites.code import pypi
from posttrain.tasks.suites.code import suite as code
from posttrain.validate import agents
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import task_dirs, validate_dirs
from posttrain.validate.runs import attempt

pytestmark = pytest.mark.slow
N_TASKS = 7            # seed 0: bug fixes with 1 and 3 mutations, scratch tasks with 1 and 2 stubs


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("pypi-cache")
    try:
        for wheel in (pypi.TOOLZ.wheel, *pypi.PYTEST_WHEELS):
            pypi.fetch(wheel, path)
    except PosttrainError as e:   # a failure under CI=true (tests/ci_skips.py)
        pytest.skip(f"PyPI unreachable: {e}")
    return path


@pytest.fixture(scope="session")
def suite(tmp_path_factory, cache):
    out = tmp_path_factory.mktemp("code") / "suite"
    code.generate(out, N_TASKS, seed=0, cache=cache)
    return out


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def _cfg():
    return ValidateConfig(oracle_runs=2, determinism_runs=1)


def test_generated_tasks_validate_ok_and_probes_score_zero(suite, tmp_path):
    dirs = [d for d in task_dirs(suite) if d.name[6:10] in ("0000", "0001", "0006")]
    assert len(dirs) == 3      # 1 mutation, 2 stubs, 3 mutations; bench validates 52
    reports = list(validate_dirs(dirs, _cfg(), tmp_path / "st", 2))
    assert {r.id: r.reasons for r in reports if r.status != "ok"} == {}
    for r in reports:
        probes = r.checks["hacks"].evidence["probes"]
        assert probes["pristine_copy"]["reward"] == 0 and probes["fake_passed"]["reward"] == 0
    meta = [read_task(d).config.metadata for d in task_dirs(suite)]
    assert {m["family"] for m in meta} == {"bugfix", "scratch"}
    assert all(m["licence"] == "BSD-3-Clause" and m["host_version"] == "1.0.0" for m in meta)


def _weaken_log_text(task: Path) -> None:
    """A SWE-bench-style grader: run pytest in the agent's tree and read the log text."""
    (task / "tests/test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\ncd /app/repo\n"
        "tar -xzf /tests/pristine.tar.gz -C /app/repo\n"
        "W=$(ls /tests/wheels/*.whl | tr '\\n' ':')\n"
        "out=$(/usr/bin/python3 -I -c 'import sys; sys.path[:0] = sys.argv[1].split(\":\") + [\".\"]\n"
        "import pytest; sys.exit(pytest.main(sys.argv[2:]))' \"$W\" -p no:cacheprovider toolz/tests 2>&1)\n"
        "if echo \"$out\" | grep -q ' passed' && ! echo \"$out\" | grep -Eq '[0-9]+ (failed|error)'; "
        "then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")


def _weaken_wheel_cache(task: Path, cache: Path) -> None:
    """The pristine wheel left in a pip cache the agent can read."""
    dest = task / "environment/app/.cache/pip/wheels"
    dest.mkdir(parents=True)
    shutil.copy(cache / pypi.TOOLZ.wheel.filename, dest)


def _weaken_git_history(task: Path) -> None:
    """The pristine code one commit back in the repository's history."""
    repo = task / "environment/app/repo"
    env = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x", "GIT_COMMITTER_NAME": "x",
           "GIT_COMMITTER_EMAIL": "x@x", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    bugged = {p: p.read_bytes() for p in repo.rglob("*.py")}
    subprocess.run(["tar", "-xzf", str(task / "tests/pristine.tar.gz"), "-C", str(repo)], check=True)
    module = read_task(task).config.metadata["module"]
    patch = (task / "solution/solve.sh").read_text().split("<<'POSTTRAIN_PATCH'\n")[1].split("POSTTRAIN_PATCH")[0]
    subprocess.run(["git", "apply"], input=patch.encode(), cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qam", "pristine"], cwd=repo, check=True, env=env)
    for p, data in bugged.items():
        p.write_bytes(data)
    subprocess.run(["git", "commit", "-qam", f"refactor {module}"], cwd=repo, check=True, env=env)


def test_each_probe_is_caught_on_a_weakened_copy(suite, cache, tmp_path):
    src = next(d for d in task_dirs(suite) if d.name.endswith("bugfix"))
    weak = tmp_path / "weak"
    variants = {"log-text": (_weaken_log_text, "fake_passed"),
                "wheel-cache": (lambda t: _weaken_wheel_cache(t, cache), "pristine_copy"),
                "git-history": (_weaken_git_history, "pristine_copy")}
    for name, (weaken, _) in variants.items():
        shutil.copytree(src, weak / name, symlinks=True)
        weaken(weak / name)
    reports = {r.id: r for r in validate_dirs(task_dirs(weak), _cfg(), tmp_path / "st", 2)}
    for name, (_, probe) in variants.items():
        r = reports[name]
        assert r.status == "hackable", (name, r.reasons)
        assert r.checks["hacks"].evidence["probes"][probe]["reward"] == 1.0, (name, r.reasons)


def test_partial_agents_score_between_probes_and_oracle(suite):
    cfg = _cfg()
    scratch = [read_task(d) for d in task_dirs(suite) if d.name.endswith("scratch")]
    two = next(t for t in scratch if t.config.metadata["mutation_count"] == 2)
    half = (two.solution_dir / "mutants/partial-fix.sh").read_text()
    partial = attempt(two, cfg, script=half).reward
    assert 0.0 < partial < 1.0
    assert attempt(two, cfg, script=agents.fake_passed(two)).reward == 0.0
    assert attempt(two, cfg, oracle=True).reward == 1.0
    bugfix = [read_task(d) for d in task_dirs(suite) if d.name.endswith("bugfix")]
    multi = next((t for t in bugfix if t.config.metadata["mutation_count"] > 1), None)
    if multi is not None and (multi.solution_dir / "mutants/partial-fix.sh").exists():
        # Bug fixes are all or nothing by the formula: fixing one of two bugs earns 0.
        assert attempt(multi, cfg, script=(multi.solution_dir / "mutants/partial-fix.sh")
                       .read_text()).reward == 0.0


def test_same_seed_same_files(suite, cache, tmp_path):
    again = tmp_path / "again"
    code.generate(again, 1, seed=0, cache=cache)
    first = sorted(task_dirs(suite))[0]
    assert _digest(again / first.name) == _digest(first)
