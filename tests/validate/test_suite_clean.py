"""The built-in suite validates clean: one task of every terminal-basics family."""

import pytest

from posttrain.tasks.suites import terminal_basics
from posttrain.validate.runner import task_dirs, validate_dirs

from validate_helpers import task_only_status

KNOWN = ("copy-file's test compares the copy with its source, which the agent can also "
         "rewrite (fix in tasks/suites/terminal_basics.py: compare with the known content)")


@pytest.mark.xfail(reason=KNOWN, strict=False)
def test_builtin_suite_validates_clean(tmp_path, quick_cfg):
    n = len(terminal_basics.FAMILIES)
    terminal_basics.generate(tmp_path / "suite", n, seed=7, split="train")
    reports = list(validate_dirs(task_dirs(tmp_path / "suite"), quick_cfg, tmp_path / "st", 2))
    assert len(reports) == n
    bad = {r.id: r.reasons for r in reports if task_only_status(r) != "ok"}
    assert not bad, bad
    for r in reports:
        assert r.checks["mutation"].evidence["strength"] == 1.0
