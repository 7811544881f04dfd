"""Terminal-Bench 1 tasks with real Dockerfiles (RUN apt-get, RUN pip install, pytest tests,
data files), imported and validated under the docker backend with a real engine: every
sound task's oracle passes and its no-op fails; the defective ones are flagged."""

import os

import pytest
from tb1_docker_tasks import DEFECTIVE, SOUND, write_suite

from posttrain.tasks import read_task
from posttrain.tasks.tb1.importer import import_tb1
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import task_dirs, validate_dirs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def imported(tmp_path_factory, docker_task_env):
    root = tmp_path_factory.mktemp("tb1docker")
    write_suite(root / "tb1")
    import_tb1(root / "tb1", root / "tasks")
    return root


def test_import_fidelity(imported):
    tasks = imported / "tasks"
    assert (tasks / "heredoc-config/environment/.posttrain-heredoc-1").read_text() == \
        "[server]\nhost = 127.0.0.1\nport = 8123\n"
    assert "<<" not in (tasks / "heredoc-config/environment/Dockerfile").read_text()
    assert "python3\nopen(" in (tasks / "keystroke-repl/solution/keystrokes.txt").read_text()
    assert os.access(tasks / "no-run-bit/tests/run-tests.sh", os.X_OK)
    assert read_task(tasks / "tests-write-outside-app").config.verifier.user == "root"


def test_sound_tasks_pass_and_defects_are_flagged(imported):
    cfg = ValidateConfig(oracle_runs=1, determinism_runs=1, max_mutants=0, backend="docker",
                         probe_timeout_s=30)
    reports = {r.id: r for r in validate_dirs(task_dirs(imported / "tasks"), cfg,
                                              imported / "state", jobs=2)}
    print("\n" + "\n".join(f"{k:26} {r.status:9} {'; '.join(r.reasons)[:110]}"
                           for k, r in sorted(reports.items())))
    for name in SOUND:
        checks = reports[name].checks
        assert checks["oracle"].passed, (name, checks["oracle"].reason)
        assert checks["nop"].passed, (name, checks["nop"].reason)
        assert reports[name].status == "ok", (name, reports[name].reasons)
    shadow = reports["shadowable-verifier"]
    assert shadow.status == "hackable" and "shadow" in shadow.checks["hacks"].evidence["raised"]
    assert reports["already-solved"].status == "hackable"
    assert reports["already-solved"].checks["nop"].flags == "hackable"
    net = reports["verifier-downloads"]
    assert net.status == "broken" and "the verifier needs network" in net.checks["oracle"].reason
    assert "URLError" in net.checks["oracle"].evidence["verifier_output_tail"]
    assert set(reports) == set(SOUND) | set(DEFECTIVE)
