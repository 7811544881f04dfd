"""Terminal-Bench 1's docker-compose.yaml in Harbor's layout (multi-container TB1 tasks).

TB1 names the agent's container `client` (image ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME},
`sleep infinity`, the harness's log volumes, TEST_DIR); Harbor names it `main` and builds it
from environment/Dockerfile. A file with only `client` adds nothing and is dropped. One with
other services becomes environment/docker-compose.yaml: `client` turns into `main` keeping
only its `depends_on` and its own environment; the other services are kept, less their
fixed container names and the harness's host log paths, and the remaining ${T_BENCH_*}
variables are given the values the harness gave them (or Harbor's names for them).
"""

from __future__ import annotations

import re

import yaml

from posttrain.errors import TaskError

CLIENT = "client"
HARNESS_ENV = {"TEST_DIR"}                    # set by the verifier (tests/test.sh) instead
VALUES = {"T_BENCH_TEST_DIR": "/tests", "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
          "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/logs/agent",
          "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": "${MAIN_IMAGE_NAME}",
          "T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME": "main"}
HOST_PATHS = ("T_BENCH_TASK_LOGS_PATH", "T_BENCH_TASK_AGENT_LOGS_PATH")
VAR_RE = re.compile(r"\$\{?(T_BENCH_[A-Z_]+)\}?")


def _environment(env) -> dict:
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: v for k, v in (env or {}).items() if k not in HARNESS_ENV}


def _main(client: dict) -> dict:
    main = {"image": "${MAIN_IMAGE_NAME}"}
    if client.get("depends_on"):
        main["depends_on"] = client["depends_on"]
    env = _environment(client.get("environment"))
    if env:
        main["environment"] = env
    return main


def _sidecar(svc: dict) -> dict:
    out = {k: v for k, v in svc.items() if k != "container_name"}
    deps = out.get("depends_on")
    if isinstance(deps, list):
        out["depends_on"] = ["main" if d == CLIENT else d for d in deps]
    elif isinstance(deps, dict):
        out["depends_on"] = {"main" if d == CLIENT else d: v for d, v in deps.items()}
    vols = [v for v in out.get("volumes") or () if not any(p in str(v) for p in HOST_PATHS)]
    if "volumes" in out:
        out["volumes"] = vols
        if not vols:
            del out["volumes"]
    return out


def harbor_compose(text: str, task_id: str) -> str | None:
    """The Harbor docker-compose.yaml for a TB1 one; None when it has no sidecar."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise TaskError(f"{task_id}: docker-compose.yaml is not valid YAML: "
                        f"{str(e).splitlines()[0]}") from None
    services = data.get("services") or {}
    if not isinstance(services, dict) or set(services) <= {CLIENT}:
        return None
    out = {k: v for k, v in data.items() if k not in ("version", "services")}
    out["services"] = {"main": _main(services.get(CLIENT) or {}),
                       **{name: _sidecar(svc or {}) for name, svc in services.items()
                          if name != CLIENT}}
    values = {**VALUES, "T_BENCH_TASK_DOCKER_NAME_PREFIX": f"tb1-{task_id}"}
    dumped = yaml.safe_dump(out, sort_keys=False)
    unknown = sorted({m.group(1) for m in VAR_RE.finditer(dumped)} - set(values))
    if unknown:
        raise TaskError(f"{task_id}: docker-compose.yaml uses {unknown}, which the importer "
                        "cannot map")
    return VAR_RE.sub(lambda m: values[m.group(1)], dumped)
