"""Pure parts of validation: static hygiene on files, oracle mutants, scripted agents."""

import os

from posttrain.tasks import read_task
from posttrain.validate import agents, mutants
from posttrain.validate.config import ValidateConfig
from posttrain.validate.static import leak_check, load_task, scan_tree

from defective import write_kind


def test_malformed_input_is_broken_with_a_clear_reason(tmp_path):
    cases = {"bad-toml": "not valid TOML", "missing-tests": "missing tests/test.sh",
             "binary-instruction": "binary", "symlink-out-of-task": "points outside",
             "huge-file": "100.0 MB", "no-oracle": "missing solution/solve.sh",
             "empty-instruction": "empty instruction"}
    for kind, words in cases.items():
        task, check = load_task(write_kind(tmp_path, kind), ValidateConfig())
        assert task is None and check.flags == "broken" and words in check.reason, (kind, check)
        assert "\n" not in check.reason


def test_a_link_inside_the_task_is_fine(tmp_path):
    root = write_kind(tmp_path, "good")
    os.symlink("input.txt", root / "environment/app/alias.txt")
    assert scan_tree(root, ValidateConfig()) == []


def test_leaks_of_solution_into_environment(tmp_path):
    assert leak_check(read_task(write_kind(tmp_path, "good"))).passed
    leaky = read_task(write_kind(tmp_path, "solution-in-environment"))
    check = leak_check(leaky)
    assert check.flags == "hackable" and "copy of solution/solve.sh" in check.reason
    (leaky.environment_dir / "Dockerfile").write_text("FROM ubuntu:24.04\nCOPY ../tests /t\n")
    assert "COPY ../tests" in leak_check(leaky).reason


def test_droppable_lines_skip_boilerplate_blocks_and_heredocs():
    script = ("#!/bin/bash\nset -e\ncd /app\necho a > x\nif true; then\n  echo b\nfi\n"
              "cat > y <<EOF\nbody\nEOF\nsort x > z\n")
    lines = script.splitlines()
    assert [lines[i] for i in mutants.droppable_lines(script)] == ["echo a > x", "sort x > z"]
    names = [n for n, _ in mutants.drop_step_mutants(script, 4)]
    assert names == ["drop line 4: echo a > x", "drop line 11: sort x > z"]


def test_value_and_truncation_mutations():
    assert mutants.change_value(b"total 60\n") == b"total 70\n"
    assert mutants.change_value(b"notes.txt\n") == b"notea.txt\n"
    assert mutants.change_value(b"") == b"x"
    assert mutants.truncate(b"3\n") == b"\n" and mutants.truncate(b"abcd\n") == b"ab\n"


def test_probes_are_built_from_what_the_tests_reference(tmp_path):
    task = read_task(write_kind(tmp_path, "trusts-agent-writable-file"))
    assert agents.referenced_paths(task) == ["/app/check.sh"]
    assert "/app/check.sh" in agents.plant(task)
    assert "/app/bin/python3" in agents.shadow(task)
    assert "mkdir" in agents.tested_commands(task)


def test_paths_the_tests_write_themselves_are_not_inputs(tmp_path):
    task = read_task(write_kind(tmp_path, "good"))
    (task.tests_dir / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /tmp/work\ncat /app/answer.txt | tee /tmp/copy.txt\n"
        "python3 -c \"open('/tmp/res.json', 'w')\" > /tmp/out.txt\n"
        "echo 1 > /logs/verifier/reward.txt\n")
    assert agents.referenced_paths(task) == ["/app/answer.txt"]


def test_comments_and_copy_destinations_are_not_inputs(tmp_path):
    """Terminal-Bench's shared run-tests.sh names /app/src in a comment and copies into it in a
    branch for another language: neither is a file the tests read (it made 12 real C++ tasks
    'broken' by the instruction-files check)."""
    task = read_task(write_kind(tmp_path, "good"))
    (task.tests_dir / "test.sh").write_text(
        "#!/bin/bash\n# Merge test sources into /app/src/**\n  # and /app/notes.txt\n"
        "if [ x = java ]; then mkdir -p /app/src/main /app/src/test\n"
        "  cp -r \"$TEST_DIR/src/.\" /app/src/test/java/ && mv /tmp/a /app/moved.txt; fi\n"
        "cat /app/answer.txt; cp /app/input.csv /tmp/copy.csv\n"
        "echo 1 > /logs/verifier/reward.txt\n")
    assert agents.referenced_paths(task) == ["/app/answer.txt", "/app/input.csv", "/tmp/a"]  # sources are read


def test_hygiene_warnings_are_evidence_not_failures(tmp_path):
    root = write_kind(tmp_path, "good")
    (root / "tests/test.sh").write_text((root / "tests/test.sh").read_text()
                                        + "pip install pytest requests==2.0\nset -e\n")
    (root / "instruction.md").write_text("Sum the numbers into answer.txt\n")
    task, check = load_task(root, ValidateConfig())
    assert check.passed and task is not None
    warnings = " | ".join(check.evidence["warnings"])
    assert "unpinned Python packages: pytest" in warnings and "requests" not in warnings
    assert "no absolute path" in warnings and "set -e" in warnings
