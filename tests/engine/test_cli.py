"""`posttrain plan-kv`, `models` and `serve` commands: planner numbers and clear errors."""

import json

import typer
from typer.testing import CliRunner

from posttrain.commands import models, serve
from posttrain.engine.paged.kv_cache import kv_bytes_per_token
from posttrain.engine.paged.planner import plan_kv, read_model_config
from posttrain.models.tiny import save_policy


def app() -> typer.Typer:
    a = typer.Typer()
    models.register(a)
    serve.register(a)
    return a


def test_plan_kv_for_a_real_config(tmp_path):
    cfg = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = CliRunner().invoke(app(), ["plan-kv", "--model", str(tmp_path), "--context", "1000000", "--json"])
    plan = json.loads(r.output)
    assert plan["bytes_per_token"] == 2 * 30 * 3 * 64 * 4 == kv_bytes_per_token(30, 3, 64, "float32")
    assert plan["total_bytes"] == plan["bytes_per_token"] * 1_000_000


def test_plan_kv_int8_and_presets():
    p32 = plan_kv(read_model_config("tiny"), 100, 2, "float32")
    p8 = plan_kv(read_model_config("tiny"), 100, 2, "int8")
    assert p8["bytes_per_token"] < p32["bytes_per_token"] / 3
    assert p32["blocks"] == 2 * 7  # 100 tokens round up to 7 blocks of 16, per sequence


def test_cli_errors_are_one_line(tmp_path):
    r = CliRunner().invoke(app(), ["plan-kv", "--model", str(tmp_path / "nope"), "--context", "5"])
    assert r.exit_code != 0 and "no model config" in str(r.exception)
    r = CliRunner().invoke(app(), ["models", "import", "no-such-model"])
    assert "unknown packaged model" in str(r.exception)
    r = CliRunner().invoke(app(), ["serve", "--model", str(tmp_path / "nope")])
    assert "no config.json" in str(r.exception)


def test_serve_refuses_int8_weights_in_fp32(tmp_path, model, tokenizer):
    save_policy(model, tokenizer, tmp_path / "ckpt")
    r = CliRunner().invoke(app(), ["serve", "--model", str(tmp_path / "ckpt"), "--dtype", "float32", "--weights", "int8"])
    assert r.exit_code != 0 and "needs bfloat16 compute" in str(r.exception)


def test_serve_and_eval_take_a_step_dir_and_latest(tmp_path, model, tokenizer):
    """A run's checkpoints/step-N and checkpoints/latest name its model/ for serve and eval alike."""
    from posttrain.evals.launch import checkpoint_dir

    ckpts = tmp_path / "run" / "checkpoints"
    save_policy(model, tokenizer, ckpts / "step-000002" / "model")
    (ckpts / "latest").write_text("step-000002")
    for given in (ckpts / "step-000002", ckpts / "latest"):
        assert checkpoint_dir(str(given)) == ckpts / "step-000002" / "model"
        # the model loads; the engine then refuses int8 weights in fp32: past the model's path
        r = CliRunner().invoke(app(), ["serve", "--model", str(given), "--dtype", "float32", "--weights", "int8"])
        assert r.exit_code != 0 and "needs bfloat16 compute" in str(r.exception), r.exception
    r = CliRunner().invoke(app(), ["serve", "--model", str(ckpts)])
    assert "checkpoints/latest" in str(r.exception)           # says what it takes
