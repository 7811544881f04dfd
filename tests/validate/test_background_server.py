"""Harbor's phase semantics: a server the oracle starts in the background still answers
when the tests run (they share the sandbox afterwards, as in Harbor and Terminal-Bench),
other leftovers do not survive into the verifier, and nothing outlives the sandbox."""

import os
import time

import pytest

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.tasks import read_task
from posttrain.validate.checks import oracle
from posttrain.validate.config import ValidateConfig

BASE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")
PORT = 8765
QUERY = (f"python3 -c \"import urllib.request; print(urllib.request.urlopen("
         f"'http://127.0.0.1:{PORT}/index.html', timeout=2).read().decode().strip())\"")
FILES = {
    "instruction.md": f"Serve /app over HTTP on port {PORT}, in the background.\n",
    "task.toml": "[agent]\ntimeout_sec = 30.0\n[verifier]\ntimeout_sec = 30.0\n",
    "environment/Dockerfile": "FROM debian:bookworm\nWORKDIR /app\n",
    # A leftover that is no server: it must be gone when the tests run.
    "solution/solve.sh": (
        "#!/bin/bash\ncd /app\necho served > index.html\n"
        f"nohup python3 -m http.server {PORT} >/tmp/server.log 2>&1 &\n"
        "nohup sh -c 'while :; do sleep 0.05; done' >/dev/null 2>&1 &\n"
        f"for i in $(seq 100); do {QUERY} >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1\n"),
    "tests/test.sh": (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "pgrep -f 'while [:]' >/dev/null && { echo leftover loop alive; echo 0 > /logs/verifier/reward.txt; exit; }\n"
        f'if [ "$({QUERY})" = served ]; then echo 1 > /logs/verifier/reward.txt\n'
        "else echo 0 > /logs/verifier/reward.txt; fi\n"),
}


def _task(root):
    for rel, text in FILES.items():
        p = root / "serve" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    return read_task(root / "serve")


def _server_pids() -> list[int]:
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{name}/cmdline", "rb").read()
        except OSError:
            continue
        if b"http.server\x00" + str(PORT).encode() in cmd:
            out.append(int(name))
    return out


def _passes_and_leaves_nothing(tmp_path, backend: str) -> None:
    task = _task(tmp_path)
    check = oracle(task, ValidateConfig(oracle_runs=1, determinism_runs=1, backend=backend), {})
    assert check.passed, (check.reason, check.evidence)
    with open_task_sandbox(task, backend) as sandbox:
        assert run_oracle(task, sandbox).exit_code == 0
        assert verify(task, sandbox).reward == 1.0
        assert _server_pids(), "the server is running while the sandbox is open"
    deadline = time.monotonic() + 30
    while _server_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _server_pids() == [], "the server outlived its sandbox"


def test_background_server_serves_the_verifier_bwrap(tmp_path):
    _passes_and_leaves_nothing(tmp_path, "bwrap")


@pytest.mark.slow
def test_background_server_serves_the_verifier_docker(tmp_path, docker_engine, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_DOCKER_BASE_MAP", f"debian={BASE}")
    _passes_and_leaves_nothing(tmp_path, "docker")
