"""Every deliberately defective kind gets the status it should, the good task gets ok,
and malformed input never stops the run. Prints the detection counts."""

from collections import Counter

from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import task_dirs, validate_dirs

from defective import KINDS, write_all


def _validate(root, cfg, jobs=2):
    return {r.id: r for r in validate_dirs(task_dirs(root), cfg, root.parent / "state", jobs)}


def test_each_defective_kind_gets_its_status(tmp_path, quick_cfg):
    kinds = [k for k in KINDS if k != "flaky-test"]   # needs more runs: below
    expected = write_all(tmp_path / "tasks", kinds)
    reports = _validate(tmp_path / "tasks", quick_cfg)
    got = {k: reports[k].status for k in kinds}
    per_status = Counter(expected.values())
    hits = Counter(expected[k] for k in kinds if got[k] == expected[k])
    print("\ndetection counts:", {s: f"{hits[s]}/{n}" for s, n in per_status.items()})
    wrong = {k: (expected[k], got[k], reports[k].reasons) for k in kinds if got[k] != expected[k]}
    assert not wrong, wrong
    for kind in kinds:
        if expected[kind] == "broken" and reports[kind].reasons:
            assert "Traceback" not in reports[kind].reasons[0]


def test_flaky_test_is_flaky_with_its_rate(tmp_path):
    write_all(tmp_path / "tasks", ["flaky-test"])
    # pass rate 1/2 per run: 12 runs all agree with probability 2 * 0.5**12 = 0.05%
    report = _validate(tmp_path / "tasks", ValidateConfig(oracle_runs=12), jobs=1)["flaky-test"]
    assert report.status == "flaky"
    ev = report.checks["oracle"].evidence
    assert 0 < ev["passes"] < 12 and ev["pass_rate"] == ev["passes"] / 12
