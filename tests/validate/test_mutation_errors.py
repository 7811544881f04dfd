"""The mutation step's own errors are reported, never a verdict: an oracle that names its
output differently on every run makes each output mutant fail to apply (the file the
probe run saw is not there), and the task keeps the status its other checks give it."""

from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import validate_dirs

from defective import write_base_task

CFG = ValidateConfig(oracle_runs=2, determinism_runs=1)
# No droppable line (all inside a block), and an output whose name changes on every run.
RANDOM_NAME = {
    "instruction.md": ("Write the sum of the numbers in /app/input.txt to a new file "
                       "/app/answer-<any number>.txt.\n"),
    "solution/solve.sh": ("#!/bin/bash\nif true; then\n"
                          "  awk '{s += $1} END {print s}' /app/input.txt > /app/answer-$RANDOM$RANDOM.txt\n"
                          "fi\n"),
    "tests/test.sh": ("#!/bin/bash\nmkdir -p /logs/verifier\n"
                      'if [ "$(cat /app/answer-*.txt 2>/dev/null)" = 60 ]; then echo 1 > '
                      "/logs/verifier/reward.txt\nelse echo 0 > /logs/verifier/reward.txt; fi\n"),
}
# The same, plus a fixed output the mutants can damage.
MIXED = RANDOM_NAME | {
    "instruction.md": RANDOM_NAME["instruction.md"] + "Also copy that sum to /app/answer.txt.\n",
    "solution/solve.sh": RANDOM_NAME["solution/solve.sh"].replace(
        "fi\n", "  cat /app/answer-*.txt > /app/answer.txt\nfi\n"),
    "tests/test.sh": RANDOM_NAME["tests/test.sh"].replace(
        '= 60 ]', '= 60 ] && [ "$(cat /app/answer.txt)" = 60 ]'),
}


def test_mutation_errors_never_make_a_task_broken(tmp_path):
    path = write_base_task(tmp_path / "tasks", "random-name", RANDOM_NAME)
    [report] = validate_dirs([path], CFG, tmp_path / "state")
    mutation = report.checks["mutation"]
    assert report.status == "ok", report.reasons
    assert mutation.passed is None and mutation.reason.startswith("not judged")
    assert all("FileNotFoundError" in e for e in mutation.evidence["errors"])
    assert report.reasons == [f"mutation: {mutation.reason}"]


def test_mutants_that_ran_still_judge_the_verifier(tmp_path):
    path = write_base_task(tmp_path / "tasks", "mixed", MIXED)
    [report] = validate_dirs([path], CFG, tmp_path / "state")
    mutation = report.checks["mutation"]
    assert report.status == "ok", report.reasons
    ev = mutation.evidence
    assert mutation.passed and ev["mutants"] >= 2 and ev["killed"] == ev["mutants"]
    assert ev["errors"] and all("answer-" in e for e in ev["errors"])
