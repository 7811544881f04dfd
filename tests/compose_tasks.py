"""A multi-container Harbor task written for the compose tests: the agent's container
(`main`) and a sidecar `api`, a small HTTP server in python that hands out a token made
fresh at each start and keeps a named volume. The agent must fetch the token over the
task's internal network; the verifier asks the same sidecar whether the token is its own,
so neither a guess nor a token from another run passes."""

from __future__ import annotations

import os
from pathlib import Path

BASE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")

SERVER = '''import http.server, os, secrets

TOKEN = secrets.token_hex(8)
os.makedirs("/var/lib/api", exist_ok=True)
open("/var/lib/api/started", "a").write(TOKEN + "\\n")   # the named volume is writable


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path, _, query = self.path.partition("?")
        body = {"/health": "ok", "/token": TOKEN,
                "/check": "yes" if query == "token=" + TOKEN else "no"}.get(path)
        self.send_response(200 if body else 404)
        self.end_headers()
        self.wfile.write((body or "not found").encode())

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
'''

COMPOSE = '''services:
  main:
    image: ${MAIN_IMAGE_NAME}
    depends_on:
      api:
        condition: service_healthy
    environment:
      API_URL: http://api:8080
  api:
    build: ./api
    volumes:
      - state:/var/lib/api
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health')"]
      interval: 1s
      timeout: 3s
      retries: 60
volumes:
  state:
'''

FETCH = "import os, urllib.request; print(urllib.request.urlopen(os.environ['API_URL'] + '/token', timeout=10).read().decode())"

TEST_SH = '''#!/bin/bash
mkdir -p /logs/verifier
answer=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://api:8080/check?token=' + open('/app/token.txt').read().strip(), timeout=10).read().decode())" 2>&1)
echo "sidecar says: $answer"
if [ "$answer" = yes ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
'''

TASK_TOML = '''version = "1.0"
[task]
name = "posttrain-tests/sidecar-token"
[metadata]
difficulty = "easy"
category = "compose-tests"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
build_timeout_sec = 600.0
memory_mb = 512
'''


def write_sidecar_task(root: Path, name: str = "sidecar-token") -> Path:
    """The task directory (Harbor layout) under root."""
    d = Path(root) / name
    for sub in ("environment/api", "solution", "tests"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "instruction.md").write_text(
        "A service named `api` on this task's network serves a token at "
        "http://api:8080/token (also in $API_URL). Write the token to /app/token.txt.\n")
    (d / "task.toml").write_text(TASK_TOML)
    (d / "environment/Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /app\n")
    (d / "environment/docker-compose.yaml").write_text(COMPOSE)
    (d / "environment/api/Dockerfile").write_text(
        f"FROM {BASE}\nCOPY server.py /srv/server.py\nCMD [\"python3\", \"/srv/server.py\"]\n")
    (d / "environment/api/server.py").write_text(SERVER)
    (d / "solution/solve.sh").write_text(f"#!/bin/bash\npython3 -c \"{FETCH}\" > /app/token.txt\n")
    (d / "tests/test.sh").write_text(TEST_SH)
    return d


TB1_COMPOSE = '''services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: ["sh", "-c", "sleep infinity"]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
      - API_URL=http://api:8080
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
    depends_on:
      - api
  api:
    build: ./api
    image: ${T_BENCH_TASK_DOCKER_NAME_PREFIX}__api
    container_name: ${T_BENCH_TASK_DOCKER_NAME_PREFIX}__api
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health')"]
      interval: 1s
      retries: 60
'''

TB1_TEST = '''import urllib.request
from pathlib import Path


def test_token_is_the_sidecars():
    token = Path("/app/token.txt").read_text().strip()
    answer = urllib.request.urlopen("http://api:8080/check?token=" + token, timeout=10).read()
    assert answer == b"yes"
'''


def write_tb1_sidecar_task(root: Path, name: str = "tb1-sidecar-token") -> Path:
    """The same task in Terminal-Bench 1's layout (client + api in docker-compose.yaml)."""
    import yaml

    from tb1_docker_tasks import HEAD, RUN_TESTS

    d = Path(root) / name
    (d / "tests").mkdir(parents=True)
    (d / "api").mkdir()
    (d / "task.yaml").write_text(yaml.safe_dump({
        "instruction": "Fetch the token from $API_URL/token and write it to /app/token.txt.",
        "difficulty": "easy", "max_agent_timeout_sec": 60, "max_test_timeout_sec": 60}))
    (d / "Dockerfile").write_text(HEAD)
    (d / "docker-compose.yaml").write_text(TB1_COMPOSE)
    (d / "api/Dockerfile").write_text(
        f"FROM {BASE}\nCOPY server.py /srv/server.py\nCMD [\"python3\", \"/srv/server.py\"]\n")
    (d / "api/server.py").write_text(SERVER)
    (d / "solution.sh").write_text(f"#!/bin/bash\npython3 -c \"{FETCH}\" > /app/token.txt\n")
    (d / "run-tests.sh").write_text(RUN_TESTS)
    (d / "tests/test_outputs.py").write_text(TB1_TEST)
    return d
