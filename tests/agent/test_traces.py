"""A trace per episode: one span per step (each model call, each command, the verifier), children
of one episode span, with tokens, latency and exit codes; through the SDK the gateway uses."""

from engine_server import ScriptedEngineServer, agent_tokenizer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.agent.traces import EpisodeTracer
from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.openai import RemoteEngine
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics


def test_a_trace_has_one_span_per_turn(tmp_path):
    tok = agent_tokenizer()
    generated, = terminal_basics.generate(tmp_path, 1, seed=0, families=["create-file"])
    task = read_task(tmp_path / generated.id)
    server = ScriptedEngineServer(tok, ["<bash>echo hi</bash>", "<bash>false</bash>", "<submit/>"])
    engine = RemoteEngine(server.url, "scripted", timeout=5)
    memory = InMemorySpanExporter()
    tracer = EpisodeTracer(exporter=memory)
    try:
        ep, = run_episodes([(task, 0)], engine, ChatFramer(tok), SamplingParams(seed=0),
                           AgentConfig(max_turns=5, sandbox_backend="bwrap"), tracer=tracer)
    finally:
        engine.close()
        server.stop()
        tracer.close()                         # flushes the batch processor
    spans = memory.get_finished_spans()
    root, = [s for s in spans if s.name == "episode"]
    children = [s for s in spans if s is not root]
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert all(s.parent.span_id == root.context.span_id for s in children)
    by = lambda kind: [s for s in children if s.name == kind]  # noqa: E731
    assert len(by("model")) == len(ep.turns) == 3
    assert [s.attributes["posttrain.turn"] for s in by("model")] == [0, 1, 2]
    assert [s.attributes["posttrain.exit_code"] for s in by("tool")] == [0, 1]
    assert len(by("verifier")) == 1 and by("verifier")[0].attributes["posttrain.reward"] == 0.0
    for s in by("model"):
        assert s.attributes["posttrain.tokens_in"] > 0 and s.attributes["posttrain.tokens_out"] > 0
        assert s.end_time >= s.start_time and s.attributes["posttrain.latency_s"] >= 0
    assert root.attributes["posttrain.status"] == "ok" and root.attributes["posttrain.turns"] == 3
