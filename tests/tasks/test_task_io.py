"""Reading and writing Harbor task directories, and their error messages."""

import pytest

from posttrain.errors import TaskError
from posttrain.tasks import TaskConfig, load_tasks, read_task, write_task
from posttrain.tasks.task import Task


def _task(tmp_path, **config):
    t = Task(id="hello", instruction="Create /app/hello.txt.\n",
             config=TaskConfig.model_validate(config), path=tmp_path,
             files={"tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
                    "solution/solve.sh": "#!/bin/bash\necho hi > /app/hello.txt\n"})
    return write_task(t, tmp_path)


def test_round_trip_keeps_config_and_files(tmp_path):
    path = _task(tmp_path, metadata={"domain": "demo", "difficulty": "easy"},
                 agent={"timeout_sec": 30.0}, environment={"memory_mb": 256})
    task = read_task(path)
    assert task.id == "hello"
    assert task.instruction == "Create /app/hello.txt.\n"
    assert task.config.agent.timeout_sec == 30.0
    assert task.config.environment.memory_mb == 256
    assert task.domain == "demo"
    assert (path / "tests/test.sh").stat().st_mode & 0o100


def test_harbor_defaults_and_deprecated_allow_internet(tmp_path):
    path = _task(tmp_path)
    (path / "task.toml").write_text('version = "1.0"\n[environment]\nallow_internet = true\n')
    cfg = read_task(path).config
    assert cfg.verifier.timeout_sec == 600.0 and cfg.environment.cpus == 1
    assert cfg.network_mode == "public"


def test_load_tasks_sorts_and_accepts_single_dir(tmp_path):
    for name in ("b", "a"):
        t = Task(id=name, instruction="x", config=TaskConfig(), path=tmp_path,
                 files={"tests/test.sh": "true\n"})
        write_task(t, tmp_path)
    assert [t.id for t in load_tasks(tmp_path)] == ["a", "b"]
    assert [t.id for t in load_tasks(tmp_path / "a")] == ["a"]


@pytest.mark.parametrize("breakage, message", [
    (lambda p: (p / "task.toml").unlink(), "missing task.toml"),
    (lambda p: (p / "tests/test.sh").unlink(), "missing tests/test.sh"),
    (lambda p: (p / "instruction.md").write_text("  \n"), "empty instruction"),
    (lambda p: (p / "instruction.md").write_bytes(b"\xff\xfe\x00"), "not UTF-8"),
    (lambda p: (p / "task.toml").write_text("[agent\n"), "not valid TOML"),
    (lambda p: (p / "task.toml").write_text('[agent]\ntimeout_sec = "soon"\n'), "agent.timeout_sec"),
    (lambda p: (p / "task.toml").write_text('[environment]\nmemory_mb = 1.5\n'), "memory_mb"),
    (lambda p: (p / "task.toml").write_text('[verifier]\nreward_range = [1, 0]\n'), "low < high"),
    (lambda p: (p / "task.toml").write_text('[verifier]\nreward_range = [0, inf]\n'), "finite"),
])
def test_malformed_task_gives_one_line_reason(tmp_path, breakage, message):
    path = _task(tmp_path)
    breakage(path)
    with pytest.raises(TaskError, match=message) as err:
        read_task(path)
    assert "\n" not in str(err.value)


def test_missing_directory_and_empty_root(tmp_path):
    with pytest.raises(TaskError, match="not a task directory"):
        read_task(tmp_path / "nope")
    with pytest.raises(TaskError, match="contains no task directories"):
        load_tasks(tmp_path)
