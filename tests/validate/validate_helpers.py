"""Helpers shared by the validation tests."""

from posttrain.validate.agents import HARNESS_PROBES
from posttrain.validate.record import Check, task_status


def task_only_status(report) -> str:
    """The status with harness-level hack probes set aside: those find holes in
    agent/trial.py's reward contract, the same for every task, reported by test_harness.py."""
    checks = dict(report.checks)
    hacks = checks.get("hacks")
    if hacks is not None and hacks.passed is False:
        task_level = [n for n in hacks.evidence.get("raised", []) if n not in HARNESS_PROBES]
        if not task_level:
            checks["hacks"] = Check("hacks", True, evidence=hacks.evidence)
    return task_status(checks)[0]
