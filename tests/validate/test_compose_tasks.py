"""`posttrain validate --backend docker` on a multi-container task (main + an HTTP sidecar,
docker-compose.yaml): the oracle passes, the no-op fails, and nothing is left running."""

import subprocess

import pytest
from compose_tasks import write_sidecar_task

from posttrain.validate import checks as dynamic
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import task_dirs, validate_dirs
from posttrain.validate.static import load_task

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
    for kind in ("ps -a", "network ls", "volume ls"):   # containers, network, named volume
        left = subprocess.run(["docker", *kind.split(), "-q", "--filter",
                               "label=com.docker.compose.project"],
                              capture_output=True, text=True).stdout.split()
        assert left == [], kind


def test_tb1_sidecar_task_imports_and_validates(tmp_path, docker_task_env):
    from compose_tasks import write_tb1_sidecar_task

    from posttrain.tasks.tb1.importer import import_tb1

    write_tb1_sidecar_task(tmp_path / "tb1")
    import_tb1(tmp_path / "tb1", tmp_path / "tasks")
    cfg = ValidateConfig(oracle_runs=1, determinism_runs=1, max_mutants=0, backend="docker",
                         probe_timeout_s=30)
    # Only the two checks this test judges (the import's compose file works: the oracle
    # reaches the sidecar, the no-op does not pass); the probes on the same sidecar task are
    # test_sidecar_task_validates_ok's (11 more sandboxes here proved nothing more).
    [path] = task_dirs(tmp_path / "tasks")
    task, static = load_task(path, cfg)
    assert task is not None, static.reason
    oracle, nop = dynamic.oracle(task, cfg, {}), dynamic.nop(task, cfg, {})
    assert oracle.passed, oracle.reason
    assert nop.passed, nop.reason
