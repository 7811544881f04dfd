"""The vLLM server command line `posttrain rl` builds from its config: `--enforce-eager` is a
default the config can turn off, and the bench's plain server leaves out the trainer's flags."""

import sys
from pathlib import Path

from posttrain.engine.fleet.servers import TRAINING_FLAGS, ServerSpec
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.served_engine import server_specs


def _commands(tmp_path: Path, *sets: str) -> list[list[str]]:
    cfg = load_rl_config(None, ['engines.kind="vllm"', "engines.replicas=2", *sets])
    return [s.command(8000 + i) for i, s in enumerate(server_specs(cfg.engines, tmp_path / "policy", tmp_path))]


def test_rl_starts_vllm_eager_by_default(tmp_path):
    for cmd in _commands(tmp_path):
        assert "--enforce-eager" in cmd
        assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"


def test_enforce_eager_false_gives_vllms_compiled_default(tmp_path):
    commands = _commands(tmp_path, "engines.enforce_eager=false", 'engines.extra_args=["--max-num-seqs", "64"]')
    assert len(commands) == 2
    for port, cmd in zip((8000, 8001), commands):
        assert "--enforce-eager" not in cmd
        assert cmd[cmd.index("--port") + 1] == str(port)
        assert cmd[-2:] == ["--max-num-seqs", "64"]               # extra_args still come last
        assert all(flag in cmd for flag in TRAINING_FLAGS)


def test_a_plain_server_has_no_training_flags_or_dev_routes(tmp_path):
    spec = ServerSpec(python="python", model_dir="m", log_path=tmp_path / "log", enforce_eager=False,
                      for_training=False)
    args = spec.server_args(9000)
    assert not {f for f in TRAINING_FLAGS if f.startswith("--")} & set(args) and "--enforce-eager" not in args
    assert "VLLM_SERVER_DEV_MODE" not in spec.environment(tmp_path)
    assert ServerSpec(python="python", model_dir="m", log_path=tmp_path / "log").env_overrides()[
        "VLLM_SERVER_DEV_MODE"] == "1"


def test_the_engine_bench_runs_vllm_compiled_and_eager_and_records_their_flags(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from parts.engine_vllm import peer_flags

    flags = peer_flags("python", tmp_path / "smollm2", ["float32"])
    compiled, eager = flags["vllm_cpu_compiled"], flags["vllm_cpu_eager"]
    assert "--enforce-eager" not in compiled["args"] and eager["args"][-1] == "--enforce-eager"
    for row in (compiled, eager):
        assert not {f for f in TRAINING_FLAGS if f.startswith("--")} & set(row["args"])
        assert "--max-model-len" not in row["args"]
        assert row["env"] == {"VLLM_CPU_KVCACHE_SPACE": "1"} and "MODEL" in row["args"]
    assert "--threads" in flags["posttrain_serve"]["args"]
