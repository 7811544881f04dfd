"""`posttrain eval --otel-endpoint`: each trial's trace reaches a real OTLP/HTTP receiver on
loopback (the gateway test's receiver, tests/gateway/test_gateway_otel.py), one trace per trial."""

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from posttrain.cli import _register_all, app
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from test_gateway_otel import attributes, receiver  # noqa: E402


def test_each_trial_is_a_trace_with_a_span_per_step(tmp_path, task_dir):
    tok = build_tokenizer(["<bash>cat /app/data.txt</bash>", "<submit/>"] * 20, vocab_size=300)
    checkpoint = save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path / "ckpt")
    server, spans = receiver()
    try:
        _register_all()
        result = CliRunner().invoke(app, [
            "eval", "--tasks", str(task_dir), "--model", str(checkpoint), "-k", "1", "--jobs", "2",
            "--job", "traced", "--jobs-dir", str(tmp_path / "jobs"), "--max-turns", "2",
            "--max-reply-tokens", "8", "--otel-endpoint", f"http://127.0.0.1:{server.server_port}/v1/traces"])
        assert result.exit_code == 0, result.output
    finally:
        server.shutdown()
    job = tmp_path / "jobs" / "traced"
    trials = {json.loads(p.read_text())["task_name"]: json.loads(p.read_text())
              for p in job.glob("*/result.json")}
    assert {service for service, _ in spans} == {"posttrain-eval"}
    roots = [s for _, s in spans if s.name == "episode"]
    # one root span per trial, named by its task, carrying the trial's status and reward
    assert sorted(attributes(s)["posttrain.task"] for s in roots) == sorted(trials) and len(roots) == 4
    for root in roots:
        steps = [s for _, s in spans if s.trace_id == root.trace_id and s is not root]
        assert all(s.parent_span_id == root.span_id for s in steps)
        names = [s.name for s in steps]
        assert names.count("model") >= 1 and names[-1] == "verifier", names
        assert set(names) <= {"model", "tool", "snapshot", "restore", "verifier"}, names
        assert all(root.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano
                   <= root.end_time_unix_nano for s in steps)
        model = [attributes(s) for s in steps if s.name == "model"]
        assert all(m["posttrain.latency_s"] > 0 for m in model)
