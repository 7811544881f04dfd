"""The built-in suite validates clean: one task of every terminal-basics family. (Its first
run found copy-file's test trusting an agent-writable source; fixed in commit d3f4543.)"""

import pytest

from posttrain.tasks.suites import terminal_basics
from posttrain.validate.runner import task_dirs, validate_dirs


def test_builtin_suite_validates_clean(tmp_path, quick_cfg):
    n = len(terminal_basics.FAMILIES)
    terminal_basics.generate(tmp_path / "suite", n, seed=7, split="train")
    reports = list(validate_dirs(task_dirs(tmp_path / "suite"), quick_cfg, tmp_path / "st", 2))
    assert len(reports) == n
    bad = {r.id: r.reasons for r in reports if r.status != "ok"}
    assert not bad, bad
    for r in reports:
        assert r.checks["mutation"].evidence["strength"] == 1.0


@pytest.mark.slow
def test_full_builtin_suites_validate_clean(tmp_path):
    """The quickstart's train (seed 0) and held-out (seed 1) suites, 64 tasks each, default
    settings (5 oracle runs)."""
    from posttrain.validate.config import ValidateConfig

    terminal_basics.generate(tmp_path / "suite", 64, seed=0, split="train")
    terminal_basics.generate(tmp_path / "suite", 64, seed=1, split="heldout")
    reports = list(validate_dirs(task_dirs(tmp_path / "suite"), ValidateConfig(),
                                 tmp_path / "st", 4))
    assert len(reports) == 128
    assert not {r.id: r.reasons for r in reports if r.status != "ok"}
