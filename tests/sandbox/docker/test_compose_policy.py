"""The compose isolation policy on merged configs (no engine needed): what reaches the host
is refused by name, every sidecar gets the sandbox's isolation, main is taken out and
what it asks for is returned; a compose task under bwrap is one clear error."""

from pathlib import Path

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.docker.compose_policy import Limits, project
from posttrain.sandbox.environment import prepare_environment

ENV = Path("/tasks/t/environment")
LIMITS = Limits(memory_mb=256, pids=64, cpus=0.5, public=False, labels={"posttrain.sandbox": "1"})


def _config(**api) -> dict:
    return {"services": {"main": {"image": "img", "environment": {"A": "1"},
                                  "depends_on": {"api": {"condition": "service_healthy"}}},
                         "api": {"image": "srv", **api}}}


@pytest.mark.parametrize("api, named", [
    ({"privileged": True}, "privileged"),
    ({"ports": ["8080:8080"]}, "ports"),
    ({"network_mode": "host"}, "network_mode 'host'"),
    ({"pid": "host"}, "pid"),
    ({"cap_add": ["SYS_ADMIN"]}, "SYS_ADMIN"),
    ({"security_opt": ["seccomp:unconfined"]}, "seccomp:unconfined"),
    ({"devices": ["/dev/kvm"]}, "devices"),
    ({"volumes": ["/var/run/docker.sock:/var/run/docker.sock"]}, "/var/run/docker.sock"),
    ({"volumes": [{"type": "bind", "source": "/tasks/t/environment/../../etc", "target": "/x"}]},
     "host path"),
])
def test_what_reaches_the_host_is_refused_by_name(api, named):
    with pytest.raises(SandboxError) as e:
        project(_config(**api), ENV, LIMITS)
    assert named in str(e.value) and "'api'" in str(e.value) and "\n" not in str(e.value)


def test_external_networks_and_main_privileges_are_refused():
    with pytest.raises(SandboxError, match="external network 'corp'"):
        project({**_config(), "networks": {"corp": {"external": True}}}, ENV, LIMITS)
    cfg = _config()
    cfg["services"]["main"]["volumes"] = ["/tasks/t/environment/data:/data"]  # even inside
    with pytest.raises(SandboxError, match="service 'main': volumes"):
        project(cfg, ENV, LIMITS)


def test_sidecars_get_the_sandbox_isolation_and_one_internal_network():
    api = {"volumes": ["/tasks/t/environment/seed.json:/seed.json:ro", "data:/data"],
           "cap_add": ["NET_BIND_SERVICE"], "container_name": "fixed", "networks": ["back"],
           "depends_on": ["main"], "labels": ["role=api"]}
    out, main = project({**_config(**api), "networks": {"back": {}}, "volumes": {"data": {}}},
                        ENV, LIMITS)
    assert set(out["services"]) == {"api"}                     # main runs outside compose
    svc = out["services"]["api"]
    assert svc["cap_drop"] == ["ALL"] and svc["cap_add"] == ["NET_BIND_SERVICE"]
    assert "no-new-privileges:true" in svc["security_opt"]
    assert (svc["mem_limit"], svc["memswap_limit"], svc["pids_limit"], svc["cpus"]) == \
        ("256m", "256m", 64, 0.5)
    assert svc["labels"] == {"role": "api", "posttrain.sandbox": "1"}
    assert not {"container_name", "networks", "depends_on"} & set(svc)
    assert out["networks"] == {"default": {"internal": True, "labels": {"posttrain.sandbox": "1"}}}
    assert out["volumes"]["data"]["labels"] == {"posttrain.sandbox": "1"}
    assert (main.image, main.environment) == ("img", {"A": "1"})


def test_a_public_task_gets_a_routed_network():
    out, _ = project(_config(), ENV, Limits(256, 64, None, public=True))
    assert out["networks"]["default"]["internal"] is False
    assert "cpus" not in out["services"]["api"]


def test_compose_task_under_bwrap_is_one_clear_error(tmp_path):
    env = tmp_path / "environment"
    env.mkdir()
    (env / "docker-compose.yaml").write_text("services:\n  api:\n    image: x\n")
    with open_sandbox("bwrap", SandboxSpec()) as sb, pytest.raises(SandboxError) as e:
        prepare_environment(env, sb)
    assert "needs the docker backend" in str(e.value) and "\n" not in str(e.value)
