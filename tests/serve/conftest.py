"""Fixtures for the server tests: the tiny agent model (serve_helpers.py), trained once, and
the real server around it on loopback."""

import pytest
import torch
from serve_helpers import Served, corpus, train

from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy


@pytest.fixture(scope="session")
def tok():
    return build_tokenizer(corpus(), vocab_size=400)


@pytest.fixture(scope="session")
def agent_model(tok):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return train(build_tiny_model(len(tok), seed=0), tok)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, agent_model, tok):
    return save_policy(agent_model, tok, tmp_path_factory.mktemp("served_model") / "tiny-agent")


@pytest.fixture(scope="module")
def served(agent_model, tok):
    from posttrain.engine.paged.local import LocalEngine
    from posttrain.serve.app import create_app

    s = Served(create_app(LocalEngine(agent_model, tok), "tiny-agent"))
    yield s
    s.close()
