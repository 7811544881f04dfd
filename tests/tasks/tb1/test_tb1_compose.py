"""Terminal-Bench 1 compose files become Harbor's: `client` turns into `main`, the harness's
variables and host log paths go, sidecars stay; a client-only file is dropped."""

import pytest
import yaml
from compose_tasks import TB1_COMPOSE, write_tb1_sidecar_task

from posttrain.errors import TaskError
from posttrain.tasks.tb1.compose import harbor_compose
from posttrain.tasks.tb1.importer import import_tb1


def test_client_becomes_main_and_sidecars_stay():
    out = yaml.safe_load(harbor_compose(TB1_COMPOSE, "t"))
    assert out["services"]["main"] == {"image": "${MAIN_IMAGE_NAME}", "depends_on": ["api"],
                                       "environment": {"API_URL": "http://api:8080"}}
    api = out["services"]["api"]
    assert api["image"] == "tb1-t__api" and "container_name" not in api
    assert api["build"] == "./api" and "T_BENCH" not in yaml.safe_dump(out)


def test_client_only_files_are_dropped_and_unknown_variables_refused(tmp_path):
    client_only = "services:\n  client:\n    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n"
    assert harbor_compose(client_only, "t") is None
    with pytest.raises(TaskError, match="T_BENCH_SOMETHING_NEW"):
        harbor_compose(TB1_COMPOSE + "    environment:\n      X: ${T_BENCH_SOMETHING_NEW}\n", "t")


def test_import_writes_the_harbor_file(tmp_path):
    write_tb1_sidecar_task(tmp_path / "tb1")
    [task] = import_tb1(tmp_path / "tb1", tmp_path / "tasks")
    env = task / "environment"
    assert (env / "api/server.py").is_file()
    assert set(yaml.safe_load((env / "docker-compose.yaml").read_text())["services"]) == \
        {"main", "api"}
