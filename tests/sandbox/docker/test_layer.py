"""An episode checkpoint of a root docker task keeps the container's own changes outside /app,
/tmp and /logs (sandbox/docker/layer.py): files added and changed, a deletion, modes; a fresh
container of the same image gets them back. A non-root (read-only root) task exports nothing."""

import pytest

from posttrain.agent.checkpoint import EpisodeStore
from posttrain.sandbox import SandboxSpec, open_sandbox

pytestmark = pytest.mark.slow
CHANGE = ("mkdir -p /opt/tool/bin && printf 'v1' > /opt/tool/bin/run && chmod 755 /opt/tool/bin/run"
          " && echo added >> /etc/issue && rm /etc/debian_version && echo in-app > /app/a")
CHECK = ("cat /opt/tool/bin/run; echo; stat -c %a /opt/tool/bin/run; tail -1 /etc/issue; "
         "test -e /etc/debian_version && echo still-there || echo gone; cat /app/a")


def test_a_root_containers_changes_come_back_in_a_fresh_container(tmp_path, docker_engine):
    store, key = EpisodeStore(tmp_path / "episodes"), ("task", 0, 0)
    with open_sandbox("docker", SandboxSpec(user="root")) as sb:
        assert sb.exec(CHANGE).exit_code == 0
        assert store.save(key, {"turn": 1}, sb)
    state, snapshot = store.load(key)
    assert (snapshot / "layer" / "layer.tar").is_file()
    with open_sandbox("docker", SandboxSpec(user="root")) as fresh:
        store.restore(snapshot, fresh)
        out = fresh.exec(CHECK)
    assert out.stdout.split() == ["v1", "755", "added", "gone", "in-app"]


def test_a_read_only_root_exports_no_layer(tmp_path, docker_engine):
    store, key = EpisodeStore(tmp_path / "episodes"), ("task", 0, 0)
    with open_sandbox("docker", SandboxSpec()) as sb:
        assert sb.exec("echo x > /app/a").exit_code == 0
        assert store.save(key, {"turn": 1}, sb)
    _, snapshot = store.load(key)
    assert not (snapshot / "layer").exists() and (snapshot / "app" / "a").read_text() == "x\n"
