"""`posttrain validate --backend docker` on a multi-container task (main + an HTTP sidecar,
docker-compose.yaml): the oracle passes, the no-op fails, and nothing is left running."""

import subprocess

import pytest
from compose_tasks import write_sidecar_task

from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import task_dirs, validate_dirs

pytestmark = pytest.mark.slow


def test_sidecar_task_validates_ok(tmp_path, docker_engine):
    write_sidecar_task(tmp_path / "tasks")
    cfg = ValidateConfig(oracle_runs=2, determinism_runs=1, max_mutants=0, backend="docker",
                         probe_timeout_s=30)
    [report] = validate_dirs(task_dirs(tmp_path / "tasks"), cfg, tmp_path / "state", jobs=1)
    checks = report.checks
    print({k: (c.passed, c.reason) for k, c in checks.items()})
    assert checks["oracle"].passed, checks["oracle"].reason
    assert checks["nop"].passed, checks["nop"].reason          # the no-op agent fails
    assert report.status == "ok", report.reasons
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=com.docker.compose.project"],
                          capture_output=True, text=True).stdout.split()
    assert left == []


def test_tb1_sidecar_task_imports_and_validates(tmp_path, docker_task_env):
    from compose_tasks import write_tb1_sidecar_task

    from posttrain.tasks.tb1.importer import import_tb1

    write_tb1_sidecar_task(tmp_path / "tb1")
    import_tb1(tmp_path / "tb1", tmp_path / "tasks")
    cfg = ValidateConfig(oracle_runs=1, determinism_runs=1, max_mutants=0, backend="docker",
                         probe_timeout_s=30)
    [report] = validate_dirs(task_dirs(tmp_path / "tasks"), cfg, tmp_path / "state", jobs=1)
    assert report.checks["oracle"].passed, report.checks["oracle"].reason
    assert report.checks["nop"].passed, report.checks["nop"].reason
