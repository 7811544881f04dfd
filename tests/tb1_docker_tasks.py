"""Terminal-Bench 1 tasks written for the docker tests: Dockerfiles with RUN apt-get and
RUN pip install, pytest tests, data files; ten sound ones and three defective ones.

Every Dockerfile starts with the same three lines, so the engine builds those layers
once for all tasks (and `FROM` names a Terminal-Bench base image that the tests map to
the local Debian image through POSTTRAIN_DOCKER_BASE_MAP).
"""

from __future__ import annotations

from pathlib import Path

TB_BASE = "ghcr.io/laude-institute/t-bench/python-3-13:20250620"
HEAD = (f"FROM {TB_BASE}\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends jq "
        "&& rm -rf /var/lib/apt/lists/*\n"
        "RUN pip install --break-system-packages --no-cache-dir pytest==8.3.4\n"
        "WORKDIR /app\n")
RUN_TESTS = "#!/bin/bash\ncd /tests\npython3 -m pytest -rA /tests/test_outputs.py\n"


def _test(body: str) -> str:
    return "import json, os, subprocess\nfrom pathlib import Path\n\n\n" + body


SOUND = {
    "csv-total": dict(
        instruction="Sum the `amount` column of /app/sales.csv and write the number to /app/total.txt.",
        docker="COPY sales.csv /app/sales.csv\n",
        files={"sales.csv": "item,amount\na,10\nb,20\nc,30\n"},
        solution="awk -F, 'NR>1 {s+=$2} END {print s}' /app/sales.csv > /app/total.txt\n",
        tests="def test_total():\n    assert Path('/app/total.txt').read_text().strip() == '60'\n"),
    "jq-active-users": dict(
        instruction="Write the names of the active users in /app/users.json, one per line, to /app/active.txt (use jq).",
        docker="COPY users.json /app/\n",
        files={"users.json": '[{"name": "ann", "active": true}, {"name": "bob", "active": false},'
                             ' {"name": "cy", "active": true}]\n'},
        solution="jq -r '.[] | select(.active) | .name' /app/users.json > /app/active.txt\n",
        tests="def test_active():\n    assert Path('/app/active.txt').read_text().split() == ['ann', 'cy']\n"),
    "fix-add-bug": dict(
        instruction="/app/calc.py has a bug in add(); fix it so add(a, b) returns a + b.",
        docker="COPY calc.py /app/\n",
        files={"calc.py": "def add(a, b):\n    return a - b\n"},
        solution="sed -i 's/a - b/a + b/' /app/calc.py\n",
        # The agent's code runs in a child process, never inside the verifier's pytest: code
        # imported in-process could patch pytest's reports (validate's fake_passed probe).
        tests="import subprocess\n\n\ndef test_add():\n"
              "    code = 'import runpy; m = runpy.run_path(\"/app/calc.py\"); print(m[\"add\"](2, 3), m[\"add\"](-1, 1))'\n"
              "    out = subprocess.run(['python3', '-I', '-c', code], capture_output=True, text=True).stdout\n"
              "    assert out.split() == ['5', '0']\n"),
    "sqlite-count": dict(
        instruction="How many orders in the SQLite database /app/shop.db cost more than 100? Write the count to /app/answer.txt.",
        docker="RUN python3 -c \"import sqlite3; c = sqlite3.connect('/app/shop.db'); "
               "c.execute('create table orders (id int, price int)'); "
               "c.executemany('insert into orders values (?, ?)', [(i, i * 7) for i in range(40)]); c.commit()\"\n",
        solution="python3 -c \"import sqlite3; print(sqlite3.connect('/app/shop.db').execute("
                 "'select count(*) from orders where price > 100').fetchone()[0])\" > /app/answer.txt\n",
        tests="def test_count():\n    assert Path('/app/answer.txt').read_text().strip() == '25'\n"),
    "word-frequency": dict(
        instruction="Write the three most frequent words of /app/text.txt, most frequent first, as a JSON list to /app/top.json.",
        docker="COPY data/ /app/\n",
        files={"data/text.txt": "the cat and the dog and the bird saw a cat\n"},
        solution="python3 -c \"import collections, json; w = open('/app/text.txt').read().split(); "
                 "json.dump([k for k, _ in collections.Counter(w).most_common(3)], open('/app/top.json', 'w'))\"\n",
        tests="def test_top():\n    assert json.loads(Path('/app/top.json').read_text()) == ['the', 'cat', 'and']\n"),
    "keystroke-repl": dict(
        instruction="Using the Python REPL, write 6*7 to /app/answer.txt.",
        solution_yaml=[{"command": "python3\n", "block": False, "append_enter": False},
                       {"command": "open('/app/answer.txt', 'w').write(str(6 * 7))", "append_enter": True},
                       {"command": "exit()", "append_enter": True}],
        tests="def test_answer():\n    assert Path('/app/answer.txt').read_text().strip() == '42'\n"),
    "heredoc-config": dict(
        instruction="Read the port from /app/server.ini and write it to /app/port.txt.",
        docker="COPY <<EOF /app/server.ini\n[server]\nhost = 127.0.0.1\nport = 8123\nEOF\n",
        solution="sed -n 's/^port = //p' /app/server.ini > /app/port.txt\n",
        tests="def test_port():\n    assert Path('/app/port.txt').read_text().strip() == '8123'\n"),
    "no-run-bit": dict(
        instruction="Create /app/hello.txt containing exactly `hello world`.",
        run_tests_mode=0o644,
        solution="printf 'hello world' > /app/hello.txt\n",
        tests="def test_hello():\n    assert Path('/app/hello.txt').read_text() == 'hello world'\n"),
    "tests-write-outside-app": dict(
        instruction="Write a shell script /app/double.sh that prints twice the number given as its argument.",
        solution="printf '#!/bin/sh\\necho $(( $1 * 2 ))\\n' > /app/double.sh && chmod +x /app/double.sh\n",
        tests="def test_double():\n    run = subprocess.run(['/app/double.sh', '21'], capture_output=True, text=True)\n"
              "    open('/opt/posttrain-scratch.txt', 'w').write(run.stdout)\n"
              "    assert Path('/opt/posttrain-scratch.txt').read_text().strip() == '42'\n"),
    "gzip-roundtrip": dict(
        instruction="Decompress /app/data.txt.gz and write the number of lines it has to /app/lines.txt.",
        docker="RUN seq 1 137 | gzip > /app/data.txt.gz\n",
        solution="zcat /app/data.txt.gz | wc -l > /app/lines.txt\n",
        tests="def test_lines():\n    assert Path('/app/lines.txt').read_text().strip() == '137'\n"),
}

DEFECTIVE = {
    # python -m pytest from /app puts /app first on sys.path: an agent's /app/pytest.py wins.
    "shadowable-verifier": dict(
        instruction="Write `ok` to /app/status.txt.",
        run_tests="#!/bin/bash\ncd /app\npython3 -m pytest -rA /tests/test_outputs.py\n",
        solution="echo ok > /app/status.txt\n",
        tests="def test_status():\n    assert Path('/app/status.txt').read_text().strip() == 'ok'\n"),
    # The image already holds the answer: a no-op agent is rewarded.
    "already-solved": dict(
        instruction="Write `ready` to /app/state.txt.",
        docker="RUN echo ready > /app/state.txt\n",
        solution="echo ready > /app/state.txt\n",
        tests="def test_state():\n    assert Path('/app/state.txt').read_text().strip() == 'ready'\n"),
    # The test bootstrap downloads a tool at verify time (as many TB1 tasks install uv).
    "verifier-downloads": dict(
        instruction="Write `done` to /app/out.txt.",
        network="none",
        run_tests="#!/bin/bash\nset -e\n"
                  "python3 -c \"import urllib.request; urllib.request.urlopen('https://astral.sh/uv/install.sh')\"\n"
                  "cd /tests\npython3 -m pytest -rA /tests/test_outputs.py\n",
        solution="echo done > /app/out.txt\n",
        tests="def test_out():\n    assert Path('/app/out.txt').read_text().strip() == 'done'\n"),
}


def write_task(root: Path, name: str, t: dict) -> Path:
    import yaml

    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(yaml.safe_dump({
        "instruction": t["instruction"], "difficulty": "easy", "category": "docker-tests",
        "max_agent_timeout_sec": 60, "max_test_timeout_sec": 60}))
    (d / "Dockerfile").write_text(HEAD + t.get("docker", ""))
    for rel, text in t.get("files", {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    if "solution_yaml" in t:
        (d / "solution.yaml").write_text(yaml.safe_dump(t["solution_yaml"]))
    else:
        (d / "solution.sh").write_text("#!/bin/bash\nset -e\n" + t["solution"])
    (d / "run-tests.sh").write_text(t.get("run_tests", RUN_TESTS))
    (d / "run-tests.sh").chmod(t.get("run_tests_mode", 0o755))
    (d / "tests" / "test_outputs.py").write_text(_test(t["tests"]))
    return d


def write_suite(root: Path, which: dict | None = None) -> list[Path]:
    """The tasks (all thirteen unless `which` names a subset) in TB1 layout under root."""
    tasks = which or {**SOUND, **DEFECTIVE}
    return [write_task(Path(root), name, t) for name, t in tasks.items()]
