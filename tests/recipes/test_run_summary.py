"""RUN/summary.json as recipes/summary.py's RunSummary: both recipes' flat keys are read back
into the typed fields, the gain and the recipe's own, and written out unchanged."""

from posttrain.recipes.summary import RunSummary

RL = {"eval_before": {"reward_mean": 0.2, "scores": {"a": [0.2]}}, "eval_after": {"reward_mean": 0.5},
      "steps": 2, "heldout_partial_before": 0.2, "paired_diff": 0.3, "paired_ci_low": 0.1,
      "paired_strict_diff": 0.0, "steps_trained": 2, "trainer": {"compute_dtype": "fp32"},
      "engine": {"dtype": "float32"}, "kernel_plan": {"dtype": "float32"}, "seed": 0, "wall_s": 1.5,
      "cpu": {"model": "x"}, "policy": "runs/rl/checkpoints/step-000002/model"}
PREEMPTED = {"preempted": True, "steps": 1, "trajectories": 4, "audit": {}, "wall_s": 0.4, "cpu": {}}


def test_a_summary_reads_into_its_fields_and_writes_back_unchanged(tmp_path):
    for flat in (RL, PREEMPTED):
        s = RunSummary.of(flat)
        assert s.as_dict() == flat
        s.write(tmp_path)
        assert RunSummary.read(tmp_path) == s
    s = RunSummary.of(RL)
    assert s.gain == {"heldout_partial_before": 0.2, "paired_diff": 0.3, "paired_ci_low": 0.1,
                      "paired_strict_diff": 0.0}
    assert s.recipe["trainer"]["compute_dtype"] == "fp32" and s.engine["dtype"] == "float32"
    assert RunSummary.of(PREEMPTED).recipe["preempted"] and RunSummary.of(PREEMPTED).seed is None
