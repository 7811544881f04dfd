"""Multi-container tasks through a real engine and docker-compose: the sidecar is reachable
by name on an internal network that leads nowhere else, it carries the sandbox's isolation,
and close, a command timeout, a pooled reuse and a SIGKILLed owner all leave nothing behind
(containers, networks, volumes). Slow: image builds and container starts."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from compose_tasks import write_sidecar_task

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.sandbox.docker.cleanup import prune
from posttrain.sandbox.pool import SandboxPool
from posttrain.sandbox.reaper import reap
from posttrain.tasks import read_task

pytestmark = pytest.mark.slow
PROJECT = "com.docker.compose.project"
OUTSIDE = ("import socket, sys\nfor host in sys.argv[1:]:\n    try:\n"
           "        socket.create_connection((host, 443), timeout=3); print(host, 'reached')\n"
           "    except OSError as e:\n        print(host, type(e).__name__)\n")


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60).stdout


def left_by(project: str) -> dict:
    """What the engine still holds of a compose project."""
    label = f"label={PROJECT}={project}"
    return {kind: _docker(*cmd, "--filter", label).split() for kind, cmd in
            (("containers", ("ps", "-aq")), ("networks", ("network", "ls", "-q")),
             ("volumes", ("volume", "ls", "-q")))}


NOTHING = {"containers": [], "networks": [], "volumes": []}


@pytest.fixture(scope="module")
def task(tmp_path_factory, docker_engine):
    return read_task(write_sidecar_task(tmp_path_factory.mktemp("compose")))


def _sidecar(project: str) -> str:
    return _docker("ps", "-q", "--filter", f"label={PROJECT}={project}").split()[0]


def test_sidecar_reachable_isolated_and_removed_on_close(task):
    sb = open_task_sandbox(task, "docker")
    project = sb.id
    try:
        out = sb.exec(f"python3 - 1.1.1.1 172.17.0.1 <<'EOF'\n{OUTSIDE}EOF", timeout_s=30).stdout
        assert "reached" not in out and out.count("Error") + out.count("timeout") == 2, out
        assert run_oracle(task, sb).exit_code == 0
        assert verify(task, sb).reward == 1.0
        slow = sb.exec("sleep 30", timeout_s=2)                   # a timeout kills main's
        assert slow.timed_out and verify(task, sb).reward == 1.0  # processes; sidecar stays
        api = _sidecar(project)
        host = json.loads(_docker("inspect", api))[0]["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and "no-new-privileges:true" in host["SecurityOpt"]
        assert host["Memory"] == 512 * 2**20 and host["PidsLimit"] == 512
        assert not host["Privileged"] and not host["PortBindings"]
        net = json.loads(_docker("network", "inspect", f"{project}_default"))[0]
        assert net["Internal"] is True
        side = subprocess.run(["docker", "exec", "-i", api, "python3", "-", "1.1.1.1"],
                              input=OUTSIDE, capture_output=True, text=True, timeout=60).stdout
        assert "reached" not in side, side
        assert "0000000000000000" in _docker("exec", api, "grep", "CapEff", "/proc/self/status")
    finally:
        sb.close()
    assert left_by(project) == NOTHING


def test_pooled_reuse_starts_a_fresh_sidecar(task):
    from posttrain.agent.trial import sandbox_spec
    from posttrain.sandbox.environment import prepare_environment

    spec = sandbox_spec(task)
    with SandboxPool(spec, "docker", warm=1) as pool:
        tokens, projects = [], []
        for _ in range(2):
            sb = pool.acquire("default", spec)
            prepare_environment(task.environment_dir, sb)
            run_oracle(task, sb)
            tokens.append(sb.host_path("/app/token.txt").read_text())
            projects.append(sb.compose.name)
            assert verify(task, sb).reward == 1.0
            pool.release(sb)
        assert pool.stats["reused"] == 2 and tokens[0] != tokens[1]   # not the old sidecar
    assert left_by(projects[0]) == NOTHING


CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from posttrain.agent.trial import open_task_sandbox
from posttrain.tasks import read_task
sb = open_task_sandbox(read_task({task!r}), "docker")
sb.exec("true", timeout_s=60)
print(sb.id, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("cleaner", ["reaper", "prune"])
def test_killed_owner_leaves_nothing(task, cleaner):
    """The next run's reaper, or `posttrain sandbox prune`, removes all of it."""
    code = CHILD.format(tests=str(Path(__file__).parents[2]), task=str(task.path))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        project = child.stdout.readline().strip()
        assert project and left_by(project)["containers"], "the child never started"
        os.killpg(child.pid, signal.SIGKILL)          # mid-run: no close(), no atexit
        child.wait(timeout=30)
        assert left_by(project) != NOTHING            # the engine still holds it all
        if cleaner == "reaper":
            reap()
        else:
            removed = prune(older_than_days=1e6)
            assert f"{project}_default" in removed["networks"] and removed["volumes"]
        assert left_by(project) == NOTHING
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)


@pytest.mark.parametrize("compose, says", [
    ("services:\n  api:\n    image: {base}\n    command: [\"sh\", \"-c\", \"echo db gone; exit 3\"]\n",
     "compose service"),
    ("services:\n  api:\n    build: ./nowhere\n", "nowhere"),
    ("services:\n  api: [not, a, service]\n", "compose config"),
])
def test_bad_sidecars_are_one_clear_line_and_leave_nothing(tmp_path, docker_engine, compose, says):
    from compose_tasks import BASE

    from posttrain.errors import SandboxError
    from posttrain.sandbox import SandboxSpec, open_sandbox
    from posttrain.sandbox.environment import prepare_environment

    env = tmp_path / "environment"
    env.mkdir()
    (env / "docker-compose.yaml").write_text(compose.format(base=BASE))
    sb = open_sandbox("docker", SandboxSpec())
    with pytest.raises(SandboxError) as e:
        prepare_environment(env, sb)
        sb.exec("true", timeout_s=60)
    sb.close()
    msg = str(e.value)
    assert says in msg and "\n" not in msg, msg
    if says == "compose service":
        assert "exit 3" in msg and "db gone" in msg
    assert left_by(sb.id) == NOTHING


def test_compose_only_task_with_a_prebuilt_main(tmp_path, docker_engine):
    """No Dockerfile: main runs `main`'s image; a sidecar from an image, no build at all."""
    from compose_tasks import BASE

    from posttrain.sandbox import SandboxSpec, open_sandbox
    from posttrain.sandbox.environment import prepare_environment

    env = tmp_path / "environment"
    env.mkdir()
    (env / "docker-compose.yaml").write_text(
        f"services:\n  main:\n    image: {BASE}\n    environment:\n      WHO: main\n"
        f"  web:\n    image: {BASE}\n    working_dir: /srv\n"
        "    command: [\"sh\", \"-c\", \"echo hi > /srv/x && python3 -m http.server 8000\"]\n"
        "    tmpfs: [/srv]\n")
    with open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
        get = "import urllib.request as u, time\nfor _ in range(100):\n    try:\n" \
              "        print(u.urlopen('http://web:8000/x').read().decode()); break\n" \
              "    except OSError:\n        time.sleep(0.1)\n"
        r = sb.exec(f"echo $WHO; python3 - <<'EOF'\n{get}EOF", timeout_s=60)
        assert r.stdout == "main\nhi\n\n", r
        project = sb.id
    assert left_by(project) == NOTHING
