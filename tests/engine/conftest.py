"""Shared fixtures for engine tests: one tiny tokenizer and model, built in-process; the vLLM
environment and SmolLM2 for the slow vLLM tests."""

import os
import subprocess
from pathlib import Path

import pytest

from posttrain.models.tiny import build_tiny_model, build_tokenizer

CORPUS = [
    f"<|user|>run step {i}: ls -la /app && cat file_{i}.txt | grep 'héllo wörld'<|end|>"
    "<|assistant|><bash>echo done</bash><|end|>"
    for i in range(200)
]


@pytest.fixture(scope="session")
def corpus():
    return CORPUS


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer(CORPUS, vocab_size=400)


@pytest.fixture(scope="session")
def model(tokenizer):
    return build_tiny_model(len(tokenizer), seed=0)


# ---- vLLM (slow tests): its own venv from scripts/vllm_env.sh, SmolLM2 from `models import` ----

REPO = Path(__file__).resolve().parents[2]


def _need(what: str, how: str):
    """Skip with the reason (a failure in CI: tests/ci_skips.py)."""
    pytest.skip(f"{what} is not set up; {how}")


@pytest.fixture(scope="session")
def vllm_python() -> str:
    py = REPO / ".venv-vllm" / "bin" / "python"
    if os.environ.get("CI") == "true":
        subprocess.run(["bash", str(REPO / "scripts" / "vllm_env.sh")], check=True, stdout=subprocess.DEVNULL)
    if not py.exists() or subprocess.run([str(py), "-c", "import vllm"], capture_output=True).returncode:
        _need("the vLLM environment .venv-vllm", "run: bash scripts/vllm_env.sh")
    return str(py)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from posttrain.models.gguf import cache_dir

    path = cache_dir() / "models" / "smollm2-135m-instruct"
    if not (path / "config.json").is_file():
        _need("SmolLM2-135M-Instruct", "run: posttrain models import (docs/engine.md)")
    return path
