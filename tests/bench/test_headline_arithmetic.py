"""The bench code that computes headlines, on small inputs worked by hand: bench/real_rl.py's
step times and its pairing against TRL, bench/parts/trl_grpo.py's GRPOConfig and rates, and
bench/validate_real.py's flag precision."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import real_rl  # noqa: E402
import validate_real  # noqa: E402
from parts.trl_grpo import grpo_flags, rates  # noqa: E402

from posttrain.validate.record import Check  # noqa: E402


def test_step_times_are_means_over_the_rl_rows(tmp_path):
    rows = [{"step_wall_s": 10.0, "engine_busy_frac": 0.5, "forward_s": 2.0, "backward_s": 3.0,
             "elapsed_s": 10.0, "reward_mean": 0.1},
            {"step_wall_s": 20.0, "engine_busy_frac": 0.25, "forward_s": 4.0, "backward_s": 5.0,
             "elapsed_s": 30.04, "reward_mean": 0.123456}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # generation: (0.5 * 10 + 0.25 * 20) / 2 = 5; the wall is the last row's elapsed time
    assert real_rl.step_times(tmp_path) == {
        "rl_wall_s": 30.0, "steps": 2, "step_wall_s": 15.0, "generation_s": 5.0, "logprobs_s": 3.0,
        "backward_s": 4.0, "reward_curve": [0.1, 0.1235]}


POSTTRAIN = {"steps": 24, "rl_wall_s": 600.0, "steps_per_s": 0.03, "trajectories_per_s": 0.9,
             "step_wall_s": 25.0, "generation_s": 20.0, "logprobs_s": 9.0, "backward_s": 13.0}


def test_versus_pairs_by_prompt_ours_first():
    """Ours 1, .5, 0 on prompts a, b, c; TRL's 0, .5, .5 (and x, which ours did not score):
    d = 1, 0, -.5, mean 1/6; sd(d) = sqrt(7/12), SE = sqrt(7/36) = 0.44096; t(.975, 2) = 4.30265,
    so the CI is 1/6 -+ 1.89731; |t| = 0.37796 on 2 df: p = 1 - t / sqrt(2 + t^2) = 0.7418."""
    ours = POSTTRAIN | {"after_scores": {"a": [1.0], "b": [0.5], "c": [0.0]}}
    theirs = {"scores": {"a": [0.0], "b": [0.5], "c": [0.5], "x": [1.0]}, "strict_mean": 0.25}
    v = real_rl.versus(ours, {"steps_per_s": 0.01, "trajectories_per_s": 0.25}, theirs)
    assert v["vs_trl_steps_per_s"] == 3.0 and v["vs_trl_trajectories_per_s"] == 3.6
    assert v["posttrain_heldout_partial_at_equal_wall"] == 0.5
    assert v["trl_heldout_partial_at_equal_wall"] == 0.3333
    assert v["trl_heldout_strict_at_equal_wall"] == 0.25
    assert v["posttrain_minus_trl"] == {"diff": 0.1667, "ci_low": -1.7306, "ci_high": 2.064, "p": 0.742}
    assert v["posttrain"] == POSTTRAIN


def test_trl_rates_and_step_split():
    """10 steps of 2 groups of 4 in 50 s: 0.2 steps/s, 1.6 trajectories/s; per step, of the
    50 s: generation 20, the rest of _prepare_inputs 25 - 20, compute_loss 15, the rest 10."""
    totals = {"_generate": 20.0, "_prepare_inputs": 25.0, "compute_loss": 15.0}
    got = rates(10, 50.0, totals, {"groups_per_step": 2, "group_size": 4})
    assert got == {"steps": 10, "train_wall_s": 50.0, "steps_per_s": 0.2, "trajectories_per_s": 1.6,
                   "step_split_s": {"generation_s": 2.0, "rewards_s": 0.5, "logprobs_s": 1.5,
                                    "backward_optimizer_s": 1.0}}


@pytest.mark.parametrize("dtype, bf16", [("bf16", True), ("fp32", False)])
def test_the_trl_config_matches_the_run(dtype, bf16):
    run = {"groups_per_step": 4, "group_size": 8, "max_tokens": 96, "lr": 2e-5, "dtype": dtype,
           "lora_rank": 16, "lora_alpha": 32, "seed": 0}
    flags = grpo_flags(run)
    # one optimizer step = the run's 4 groups of 8 replies, each group one prompt's 8 samples
    assert flags["per_device_train_batch_size"] == 32 and flags["num_generations"] == 8
    assert flags["max_completion_length"] == 96 and flags["learning_rate"] == 2e-5
    assert flags["bf16"] is bf16 and flags["seed"] == 0 and flags["use_cpu"]
    assert flags["beta"] == 0.0 and flags["lr_scheduler_type"] == "constant"


def _report(rid: str, status: str, oracle: bool | None = True, flag: str = "", mutants=(0, 0), reasons=()):
    checks = {"mutation": Check("mutation", flag != "weak-verifier", "weak-verifier",
                                evidence={"mutants": mutants[0], "killed": mutants[1]})}
    if oracle is not None:
        checks["oracle"] = Check("oracle", oracle)
    if flag == "hackable":
        checks["hacks"] = Check("hacks", False, "hackable")
    return SimpleNamespace(id=rid, status=status, reasons=list(reasons), checks=checks)


def test_flag_precision_is_true_flags_over_reviewed_flags():
    reports = [
        _report("weak1", "weak-verifier", flag="weak-verifier", mutants=(8, 3)),
        _report("weak2", "weak-verifier", flag="weak-verifier", mutants=(8, 4)),
        _report("hack", "hackable", flag="hackable", mutants=(4, 4)),
        _report("fine", "ok", mutants=(8, 8)),
        _report("unseen", "weak-verifier", flag="weak-verifier", mutants=(2, 0)),
        _report("nobuild", "broken", oracle=None, reasons=["docker build of x failed"]),
        _report("badoracle", "broken", oracle=False, mutants=(8, 0)),
    ]
    review = {("weak1", "weak-verifier"): {"verdict": "true"}, ("weak2", "weak-verifier"): {"verdict": "true"},
              ("hack", "hackable"): {"verdict": "false"}}
    s = validate_real.summarize(reports, review)
    # 4 flags on the 5 usable tasks, 3 reviewed, 2 of them true: 2/3; the left-out tasks' mutants
    # are not counted
    assert (s["tasks_tried"], s["real_tasks"]) == (7, 5)
    assert s["skipped"] == {"build_failed": 1, "oracle_failed": 1, "other": 0}
    assert s["statuses"] == {"hackable": 1, "ok": 1, "weak-verifier": 3}
    assert (s["mutants"], s["mutants_killed"]) == (30, 19)
    assert (s["flags"], s["reviewed"], s["true_flags"], s["flag_precision"]) == (4, 3, 2, 0.667)
    assert s["unreviewed"] == ["unseen:weak-verifier"]
    assert s["left_out"] == {"nobuild": "build_failed", "badoracle": "oracle_failed"}
    assert validate_real.summarize(reports[3:4], {})["flag_precision"] is None   # no flag to review
