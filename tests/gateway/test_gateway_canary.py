"""The canary gate: the non-inferiority decision, and a running gateway applying and auditing it."""

import json
import sqlite3

import httpx
import pytest
from gateway_servers import backend, free_port, gateway, running, toml_config

from posttrain.gateway.audit import verify
from posttrain.gateway.canary import WIDENED, decide


def suite(means: list[float], k: int = 4) -> dict[str, list[float]]:
    """Per-task binary scores with the given pass counts out of k."""
    return {f"t{i}": [1.0] * round(m * k) + [0.0] * (k - round(m * k)) for i, m in enumerate(means)}


def shifted(scores: dict[str, list[float]], moved: int, by: float = -0.25) -> dict[str, list[float]]:
    """The same scores with the first `moved` tasks lowered (or raised) by `by`, within [0, 1]."""
    out = dict(scores)
    for t in list(scores)[:moved]:
        out[t] = [min(1.0, max(0.0, s + by)) for s in scores[t]]
    return out


def test_near_equal_variants_are_promoted_worse_ones_rolled_back():
    base = suite([0.25, 0.5, 0.75, 1.0, 0.0, 0.5] * 15)
    near = shifted(base, 3, by=+0.25)                      # three tasks of 90 a little better
    same = decide("fast", "standard", near, base, margin=0.05)
    assert same.decision == "promote" and same.n_tasks == 90 and same.interval == WIDENED
    mixed = suite([0.25, 0.5, 0.75, 1.0, 0.0, 0.5] * 40)   # 240 tasks, half better, half worse
    mixed = shifted(shifted(mixed, 120, by=-0.25), 60, by=+0.5)
    assert decide("fast", "standard", mixed, suite([0.25, 0.5, 0.75, 1.0, 0.0, 0.5] * 40),
                  margin=0.1).interval == "t"                # real spread: the t-interval is wider
    worse = suite([0.0, 0.25, 0.5, 0.75, 0.0, 0.25] * 6)  # every task 0.25 worse, or 0 when already 0
    d = decide("int8", "standard", worse, base, margin=0.05)
    assert d.decision == "rollback" and d.reason.startswith("inferior") and d.ci_high < -0.05


@pytest.mark.parametrize("n_tasks", [1, 2])
def test_one_or_two_tasks_at_zero_vs_zero_do_not_promote(n_tasks):
    zeros = suite([0.0] * n_tasks)
    d = decide("fast", "standard", zeros, zeros, margin=0.05, min_tasks=1)
    assert d.decision == "rollback" and d.reason.startswith("insufficient evidence")
    assert d.ci_low < -0.5 and d.ci_high > 0.5          # never a point interval
    d = decide("fast", "standard", zeros, zeros, margin=0.05)
    assert d.decision == "rollback" and "fewer than min_tasks = 20" in d.reason


def test_a_few_tasks_moving_do_not_make_the_interval_narrower_than_none_moving():
    """36 tasks, three of them a little better: the t-interval's lower end (about -0.01) would
    promote at margin 0.05, while 36 all-equal tasks (bound -0.097) would not."""
    base = suite([0.25, 0.5, 0.75, 1.0, 0.0, 0.5] * 6)
    near = shifted(base, 3, by=+0.25)
    d = decide("fast", "standard", near, base, margin=0.05)
    assert d.n_tasks == 36 and d.interval == WIDENED and d.ci_low < -0.05
    assert d.decision == "rollback" and d.reason.startswith("insufficient evidence")
    assert decide("fast", "standard", base, base, margin=0.05).ci_low > d.ci_low - 0.01


def test_thirty_equal_tasks_are_not_decided_on_a_point_interval():
    """The gateway benchmark's int8 case: 30 tasks, every difference exactly 0."""
    base = suite([0.0, 1 / 3, 2 / 3, 1.0, 1 / 3] * 6, k=3)
    d = decide("int8", "standard", base, base, margin=0.1)
    assert d.n_tasks == 30 and d.diff == 0 and d.interval == "zero-spread bound"
    assert d.ci_low == pytest.approx(-(1 - 0.025 ** (1 / 30))) and d.ci_low < -0.1
    assert d.decision == "rollback" and d.reason.startswith("insufficient evidence")
    many = suite([0.0, 0.5, 1.0] * 30)                      # 90 tasks: the exact bound clears -0.05
    assert decide("int8", "standard", many, many, margin=0.05).decision == "promote"


def test_too_few_tasks_is_not_shown_noninferior():
    base = suite([0.5, 0.75, 0.25])
    noisy = suite([0.75, 0.5, 0.0])
    d = decide("fast", "standard", noisy, base, margin=0.05, min_tasks=3)
    assert d.decision == "rollback" and "3 tasks, more tasks narrow it" in d.reason


def test_lossless_variant_needs_identical_greedy_probes():
    base = suite([0.0, 0.5, 1.0] * 30)
    assert decide("spec", "standard", base, base, 0.05, lossless=True, probes=(6, 6)).decision == "promote"
    d = decide("spec", "standard", base, base, 0.05, lossless=True, probes=(5, 6))
    assert d.decision == "rollback" and "differ on 1 of 6" in d.reason
    with pytest.raises(ValueError):
        decide("spec", "standard", base, base, 0.05, lossless=True)


def test_gateway_applies_and_audits_a_decision(tmp_path):
    b, g = free_port(), free_port()
    extra = '[canary]\ncandidate = "fast"\nbaseline = "standard"\nshare = 0.0\nmargin = 0.05\n'
    cfg = tmp_path / "g.toml"
    cfg.write_text(toml_config(g, tmp_path / "audit.sqlite", {"standard": [b], "fast": [b]}, extra=extra))
    url = f"http://127.0.0.1:{g}"
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    with running(backend(b, serves=["standard", "fast"]), gateway(cfg, g)) as procs:
        variant = (lambda s: httpx.post(url + "/v1/chat/completions", json=body,
                                        headers={"X-Session-Id": s}).headers["x-posttrain-variant"])
        assert {variant(f"a{i}") for i in range(10)} == {"standard"}          # share 0: no canary traffic
        base = suite([0.5, 0.25, 1.0, 0.75] * 20)
        near = {t: (v[:-1] + [1.0] if i % 10 == 0 else v) for i, (t, v) in enumerate(base.items())}
        decision = decide("fast", "standard", near, base, 0.05).to_dict()
        assert decision["decision"] == "promote"
        r = httpx.post(url + "/v1/gateway/canary", json=decision)
        assert r.status_code == 200 and r.json()["canary_share"] == 1.0
        assert {variant(f"b{i}") for i in range(10)} == {"fast"}              # promoted: new sessions go to fast
        assert variant("a1") == "standard"                                     # pinned sessions stay
        bad = httpx.post(url + "/v1/gateway/canary", json={**decision, "decision": "maybe"})
        assert bad.status_code == 400 and "error" in bad.json()
        procs[1].stop()
        procs[1].start()                                                       # the decision survives a restart
        assert variant("c1") == "fast"
    rows = sqlite3.connect(tmp_path / "audit.sqlite").execute("SELECT detail FROM calls WHERE kind = 'canary'").fetchall()
    assert len(rows) == 1 and json.loads(rows[0][0])["decision"] == "promote"
    assert verify(str(tmp_path / "audit.sqlite")).ok


def eval_job(path, scores: dict[str, list[float]], **conditions):
    """A real `posttrain eval` job directory holding these per-task scores."""
    from posttrain.evals.conditions import EvalConditions
    from posttrain.evals.jobdir import JobDir
    from posttrain.evals.record import TrialOutput, TrialRecord

    k = max(len(v) for v in scores.values())
    c = EvalConditions(**{"model": path.name, "protocol": "tools", "k": k, "task_ids": tuple(scores), **conditions})
    job = JobDir(path).open(c)
    for task, values in scores.items():
        for i, s in enumerate(values):
            rec = TrialRecord(task, i, "passed" if s >= 1 else "failed", s)
            job.write_trial(TrialOutput(rec, {}), {})
    job.close()
    return path


def canary_cli(tmp_path, cand, base, port=1, lossless=False, extra_args=()):
    import os
    import subprocess
    import sys

    cfg = tmp_path / "g.toml"
    extra = '[canary]\ncandidate = "fast"\nbaseline = "standard"\nshare = 0.0\nmargin = 0.05\n'
    text = toml_config(free_port(), tmp_path / "audit.sqlite", {"standard": [port], "fast": [port]}, extra=extra)
    cfg.write_text(text.replace("[variants.fast]\n", "[variants.fast]\nlossless = true\n") if lossless else text)
    code = "from posttrain.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, "gateway", "canary", str(cfg), "--candidate-job", str(cand),
                           "--baseline-job", str(base), *extra_args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "400"})


def test_jobs_under_different_conditions_are_refused(tmp_path):
    scores = suite([0.0, 0.5, 1.0] * 30)
    base = eval_job(tmp_path / "std", scores, temperature=0.7, max_turns=20)
    cand = eval_job(tmp_path / "fast", scores, temperature=0.0, max_turns=10)
    r = canary_cli(tmp_path, cand, base)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "different conditions" in r.stderr and "temperature: 0.0 -> 0.7" in r.stderr and "max_turns" in r.stderr
    assert not (tmp_path / "audit.sqlite").exists()                  # nothing decided, nothing recorded
    same = eval_job(tmp_path / "fast2", scores, temperature=0.7, max_turns=20)
    r = canary_cli(tmp_path, same, base)                              # only the model differs: decided
    assert r.returncode == 0 and "promote" in r.stdout, r.stdout + r.stderr


def test_lossless_canary_refuses_greedy_probes_on_bf16_backends(tmp_path):
    scores = suite([0.0, 0.5, 1.0] * 30)
    base, cand = eval_job(tmp_path / "std", scores), eval_job(tmp_path / "fast", scores)
    b = free_port()
    with running(backend(b, "--dtype", "bfloat16", serves=["standard", "fast"])):
        r = canary_cli(tmp_path, cand, base, port=b, lossless=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "refusing the canary" in r.stderr and "bfloat16" in r.stderr and "--dtype float32" in r.stderr
    assert not (tmp_path / "audit.sqlite").exists()                  # nothing decided, nothing recorded
    with running(backend(b, "--dtype", "float32", serves=["standard", "fast"])):
        r = canary_cli(tmp_path, cand, base, port=b, lossless=True)
    assert r.returncode == 0 and "greedy probes identical" in r.stdout, r.stdout + r.stderr


def test_a_probe_backend_without_the_model_is_one_line(tmp_path):
    scores = suite([0.0, 0.5, 1.0] * 30)
    base, cand = eval_job(tmp_path / "std", scores), eval_job(tmp_path / "fast", scores)
    b = free_port()
    # a backend without the model answers 404, as `posttrain serve` does for an unknown model
    with running(backend(b, "--dtype", "float32", "--fail-status", "404", serves=["standard"])):
        r = canary_cli(tmp_path, cand, base, port=b, lossless=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "answered 404" in r.stderr


def test_a_gateway_that_is_down_is_one_line(tmp_path):
    scores = suite([0.0, 0.5, 1.0] * 30)
    base, cand = eval_job(tmp_path / "std", scores), eval_job(tmp_path / "fast", scores)
    url = f"http://127.0.0.1:{free_port()}"
    r = canary_cli(tmp_path, cand, base, extra_args=("--gateway-url", url))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"cannot reach the gateway at {url}" in r.stderr
