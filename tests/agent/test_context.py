"""One test per context policy. Under each, every sampled token is trained behind exactly the
prompt the engine saw when it sampled it (the rollout's ids, never a re-rendering)."""

import pytest
import torch
from engine_server import ScriptedEngineServer, agent_tokenizer

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig, ContextConfig
from posttrain.agent.loop import run_episodes
from posttrain.agent.protocol import format_observation
from posttrain.engine.base import Engine, SamplingParams
from posttrain.engine.clients.openai import RemoteEngine
from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import ConfigError
from posttrain.evals.contexts import parse_contexts
from posttrain.models.tiny import build_tiny_model
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics
from posttrain.train.batch import by_segment
from posttrain.types import ExecResult

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=64, max_position_embeddings=4096)


class Recorder(Engine):
    """The engine it wraps, with every (prompt, sampled ids, logprobs) it was asked for."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def generate(self, prompts, params):
        out = self.engine.generate(prompts, params)
        self.calls += [(list(p), c.token_ids, c.logprobs) for p, c in zip(prompts, out)]
        return out


@pytest.fixture(scope="module")
def tok():
    return agent_tokenizer()


@pytest.fixture(scope="module")
def tiny(tok):
    torch.manual_seed(0)
    return LocalEngine(build_tiny_model(len(tok), seed=0, **SMALL), tok)


@pytest.fixture
def task(tmp_path):
    generated, = terminal_basics.generate(tmp_path, 1, seed=0, families=["create-file"])
    return read_task(tmp_path / generated.id)


def run(engine, tok, task, context: ContextConfig, turns: int = 4):
    rec = Recorder(engine)
    cfg = AgentConfig(max_turns=turns, max_reply_tokens=8, max_context=4096, sandbox_backend="bwrap",
                      context=context)
    ep, = run_episodes([(task, 0)], rec, ChatFramer(tok), SamplingParams(seed=0), cfg)
    assert ep.status == "ok", ep.error
    return ep, rec.calls


def sampled_runs(stream):
    """(start, end) of each run of sampled tokens in a stream."""
    m, runs, i = stream.loss_mask, [], 0
    while i < len(m):
        if m[i]:
            j = i
            while j < len(m) and m[j]:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def assert_trained_as_sampled(ep, calls):
    """Each sampled run is one model call's output, behind exactly that call's prompt."""
    seen = {(tuple(p), tuple(ids)): lps for p, ids, lps in calls}
    runs = 0
    for s in ep.streams():
        for i, j in sampled_runs(s):
            key = (tuple(s.tokens[:i]), tuple(s.tokens[i:j]))
            assert key in seen, "a trained reply is not what the engine sampled after that prompt"
            assert s.logprobs[i:j] == seen[key]
            runs += 1
    assert runs == len(ep.turns) == sum(1 for st in ep.steps if st.kind == "model")


def test_keep_all_is_one_stream(tok, tiny, task):
    ep, calls = run(tiny, tok, task, ContextConfig())
    assert ep.segments == [] and len(ep.turns) == 4
    assert_trained_as_sampled(ep, calls)


def test_last_k_keeps_the_instruction_and_the_last_k_turns(tok, tiny, task):
    ep, calls = run(tiny, tok, task, ContextConfig(kind="last_k", k=1))
    framer = ChatFramer(tok)
    assert len(ep.segments) == 2                 # rewritten before the 3rd and 4th calls
    for n, stream in zip((1, 2), ep.streams()[1:]):
        head = framer.prompt(f"{task.instruction.strip()}\n\n[{n} earlier turns left out]")
        assert stream.tokens[:len(head)] == head                  # then the last turn's ids, as they were
        assert stream.prompt_len == stream.loss_mask.index(1) > len(head)
    assert_trained_as_sampled(ep, calls)
    rows, adv = by_segment([ep], [0.5])
    assert len(rows) == 3 and adv == [0.5] * 3
    assert sum(r.tokens_out for r in rows) == ep.tokens_out       # each sampled token once


def test_truncate_keeps_head_and_tail_of_a_long_observation(tok, task):
    long = ExecResult(0, "a" * 1000 + "THE-END", "", 0.1)
    text = format_observation(long, 100, tail=20)
    assert text.startswith("a" * 80) and text.endswith("THE-END") and "[... 907 characters cut ...]" in text
    server = ScriptedEngineServer(tok, ["<bash>seq 1 500</bash>", "<submit/>"])
    engine = RemoteEngine(server.url, "scripted", timeout=5)
    try:
        ep, calls = run(engine, tok, task, ContextConfig(kind="truncate", max_chars=120, tail_chars=40))
    finally:
        engine.close()
        server.stop()
    obs = ep.turns[0].observation
    assert obs.startswith("1\n2\n3") and obs.endswith("499\n500") and "characters cut" in obs
    assert ep.segments == []
    assert_trained_as_sampled(ep, calls)


def test_summarise_puts_a_summary_from_the_policy_engine_in_the_prompt(tok, tiny, task):
    ep, calls = run(tiny, tok, task, ContextConfig(kind="summarise", k=1, summary_tokens=6), turns=3)
    assert len(ep.segments) == 1
    summaries = [p for p, _, _ in calls if "Summarise what these steps" in tok.decode(p)]
    assert len(summaries) == 1                   # asked once, before the 3rd call
    new_prompt = tok.decode(ep.tokens[:ep.prompt_len])
    assert "[summary of the first 1 turns:" in new_prompt
    assert_trained_as_sampled(ep, [c for c in calls if c[0] not in summaries])


def test_context_specs_round_trip_and_are_checked():
    assert parse_contexts(["last_k:k=3", "longctx=summarise:k=2"]) == (
        ("*", "last_k:k=3"), ("longctx", "summarise:k=2,summary_engine=policy,summary_tokens=64"))
    with pytest.raises(ConfigError, match="--context 'forget:k=1'"):
        parse_contexts(["forget:k=1"])
    for spec in ("keep_all", "last_k:k=3", "truncate:max_chars=800,tail_chars=300",
                 "summarise:k=2,summary_engine=http://127.0.0.1:8000,summary_tokens=32"):
        assert ContextConfig.parse(spec).label() == spec
    with pytest.raises(ValueError, match="tail_chars"):
        ContextConfig(kind="truncate", max_chars=100, tail_chars=100)
    with pytest.raises(ValueError):
        ContextConfig.parse("recall:k=2")
