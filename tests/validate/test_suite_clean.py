"""The built-in suite validates clean: one task of every terminal-basics family. (Its first
run found copy-file's test trusting an agent-writable source; fixed in commit d3f4543.)"""

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
