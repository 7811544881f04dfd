"""Retries by error class, with real components: a loopback engine server that fails or goes away,
and a bwrap sandbox closed under the episode. A fault is retried, then an infra error; never a reward."""

import threading
import time

import pytest
from engine_server import ScriptedEngineServer
from pydantic import ValidationError

from posttrain.agent import loop
from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.retry import backoff_s, fault_class
from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.openai import RemoteEngine
from posttrain.errors import EngineError, SandboxError
from posttrain.evals import taxonomy

FAST = dict(retry_backoff_s=0.01, retry_backoff_max_s=0.05, max_turns=4, sandbox_backend="bwrap")


def episode(server, tok, task, **cfg):
    engine = RemoteEngine(server.url, "scripted", timeout=5)
    try:
        ep, = loop.run_episodes([(task, 0)], engine, ChatFramer(tok), SamplingParams(seed=0),
                                AgentConfig(**FAST | cfg))
    finally:
        engine.close()
    return ep


def test_classes_backoff_and_knobs():
    assert fault_class(EngineError("refused")) == "engine"
    assert fault_class(SandboxError("died")) == "sandbox"
    assert fault_class(ValueError("a bug")) is None
    assert [backoff_s(i, 0.5, 3.0) for i in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    with pytest.raises(ValidationError, match="retry_backoff_max_s"):
        AgentConfig(retry_backoff_s=2.0, retry_backoff_max_s=1.0)
    with pytest.raises(ValidationError):
        AgentConfig(retries=-1)


def test_engine_errors_are_retried_and_a_failed_command_is_an_observation(tok, task):
    server = ScriptedEngineServer(tok, ["<bash>echo hi</bash>", "<bash>false</bash>", "<submit/>"], fail_first=2)
    try:
        ep = episode(server, tok, task, retries=3)
    finally:
        server.stop()
    assert ep.status == "ok" and ep.retries == 2
    assert [t.kind for t in ep.turns] == ["bash", "bash", "submit"]
    assert ep.turns[1].observation.endswith("[exit 1]")      # a tool error: shown, not retried
    assert [s.kind for s in ep.steps][-1] == "verifier"


def test_an_engine_down_for_good_is_an_infra_error_never_a_reward(tok, task):
    server = ScriptedEngineServer(tok, ["<submit/>"], fail_first=100)
    try:
        ep = episode(server, tok, task, retries=2)
    finally:
        server.stop()
    assert ep.status == "infra_error" and ep.error.startswith("engine error after 3 attempts")
    assert "verifier" not in [s.kind for s in ep.steps]       # never verified
    assert taxonomy.classify(ep.status, None) == "infra_error"


def test_a_restarted_server_is_waited_for(tok, task):
    server = ScriptedEngineServer(tok, ["<bash>echo hi</bash>", "<submit/>"])
    port = server.port
    server.stop()                                             # connection refused from here on

    def restart():
        time.sleep(0.5)
        server.port = port
        server.start()
    threading.Thread(target=restart, daemon=True).start()
    try:
        ep = episode(server, tok, task, retries=6, retry_backoff_s=0.1, retry_backoff_max_s=0.4)
    finally:
        server.stop()
    assert ep.status == "ok" and ep.retries >= 1 and len(ep.turns) == 2


def test_a_sandbox_closed_mid_episode_is_retried_then_an_infra_error(tok, task, monkeypatch):
    opened = []

    def open_and_keep(*args):
        opened.append(real_open(*args))
        return opened[-1]
    real_open = loop.open_task_sandbox
    monkeypatch.setattr(loop, "open_task_sandbox", open_and_keep)
    kill = lambda turn: opened[0].close() if turn == 1 else None  # noqa: E731
    server = ScriptedEngineServer(tok, ["<bash>echo hi</bash>"], on_request=kill)
    try:
        ep = episode(server, tok, task, retries=2)
    finally:
        server.stop()
    assert ep.status == "infra_error" and ep.error.startswith("sandbox error after 3 attempts")
    assert ep.retries == 2 and len(ep.turns) == 1
    assert "verifier" not in [s.kind for s in ep.steps]
