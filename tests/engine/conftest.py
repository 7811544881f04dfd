"""Shared fixtures for engine tests: one tiny tokenizer and model, built in-process."""

import pytest

from posttrain.engine.tiny import build_tiny_model, build_tokenizer

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
