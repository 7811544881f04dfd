"""Bring your own agent: the example OpenAI-SDK agent's episode is the built-in loop's episode,
token for token; an agent that rewrites its history gets a new segment; keys, streaming and
timeouts are refused or reported."""

import sys
import time
from pathlib import Path

import httpx
from engine_server import ScriptedEngineServer
from test_harness_tools import kv_task  # noqa: F401 (the fixture)

from posttrain.agent import loop
from posttrain.agent.byo import RolloutEndpoint, run_byo_episodes
from posttrain.agent.byo.messages import new_messages, observations
from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.openai import RemoteEngine

EXAMPLE = [sys.executable, str(Path(__file__).parents[2] / "examples" / "byo_agent.py")]
REPLIES = [
    '<tool_call>[{"name": "kv_set", "arguments": {"key": "b", "value": "7"}}]</tool_call>',
    '<tool_call>[{"name": "kv_sett", "arguments": {}}]</tool_call>',
    '<tool_call>[{"name": "kv_set", "arguments": {"key": "b", "value": 7}}]</tool_call>',
    '<tool_call>[{"name": "submit", "arguments": {}}]</tool_call>']
CFG = AgentConfig(max_turns=6, sandbox_backend="bwrap")

# rewrites its history after one reply: asks again with that reply shortened
REWRITER = """
import os, httpx
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
h = httpx.Client(base_url=base, headers={"Authorization": "Bearer " + key})
task = h.get("/task").json()
first = [{"role": "user", "content": task["instruction"]}]
r = h.post("/chat/completions", json={"messages": first, "tools": task["tools"]}).json()
assert "tool_calls" not in r["choices"][0]["message"], r
r = h.post("/chat/completions", json={"messages": first + [
    {"role": "assistant", "content": "(elided)"}, {"role": "user", "content": "call a tool"}]}).json()
call = r["choices"][0]["message"]["tool_calls"][0]["function"]
print(h.post("/tools/" + call["name"], content=call["arguments"]).json())
"""


def _run(tok, task, replies, runner):
    server = ScriptedEngineServer(tok, replies)
    engine = RemoteEngine(server.url, "scripted", timeout=5)
    try:
        ep, = runner(engine)
    finally:
        engine.close()
        server.stop()
    return ep


def test_the_example_agent_records_the_built_in_loops_stream(tok, kv_task):  # noqa: F811
    framer, params = ChatFramer(tok), SamplingParams(seed=0)
    builtin = _run(tok, kv_task, REPLIES, lambda e: loop.run_episodes(
        [(kv_task, 0)], e, framer, params, CFG))
    byo = _run(tok, kv_task, REPLIES, lambda e: run_byo_episodes(
        [(kv_task, 0)], e, framer, params, CFG, EXAMPLE))
    assert byo.status == builtin.status == "ok" and byo.reward == builtin.reward == 1.0
    assert byo.tokens == builtin.tokens and byo.loss_mask == builtin.loss_mask
    assert byo.logprobs == builtin.logprobs and byo.prompt_len == builtin.prompt_len
    assert [t.kind for t in byo.turns] == [t.kind for t in builtin.turns] == \
        ["bad_arguments", "unknown_tool", "tool", "submit"]
    assert byo.parse_failures() == builtin.parse_failures() == \
        {"bad_arguments": 1, "unknown_tool": 1}
    assert byo.turns[2].observation == "ok" and not byo.segments
    assert "byo_history_rewrites" not in byo.timings


def test_a_rewritten_history_is_a_new_segment(tok, kv_task, tmp_path):  # noqa: F811
    (tmp_path / "rewriter.py").write_text(REWRITER)
    ep = _run(tok, kv_task, ["I am thinking.", REPLIES[-1]], lambda e: run_byo_episodes(
        [(kv_task, 0)], e, ChatFramer(tok), SamplingParams(seed=0), CFG,
        [sys.executable, str(tmp_path / "rewriter.py")]))
    assert ep.status == "ok", ep.error
    assert ep.timings["byo_history_rewrites"] == 1 and len(ep.segments) == 1
    assert [t.kind for t in ep.turns] == ["no_tool_call", "submit"]
    assert ep.parse_failures() == {"no_tool_call": 1}
    first, now = ep.segments[0], ep.streams()[-1]
    assert sum(first.loss_mask) > 0 and sum(now.loss_mask) > 0
    assert now.tokens[:first.prompt_len] == first.tokens[:first.prompt_len]   # same instruction
    assert "(elided)<|end|><|tool|>call a tool" in tok.decode(now.tokens[:now.prompt_len])


def test_extension_rule():
    prev = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}]
    reserialised = [prev[0], {"role": "assistant", "content": None, "tool_calls": [
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}]}]
    tools = [{"role": "tool", "content": "one"}, {"role": "tool", "content": "two"},
             {"role": "user", "content": "more"}]
    assert new_messages(prev, reserialised + tools) == tools
    assert observations(tools) == [("tool", "one\ntwo"), ("user", "more")]
    assert new_messages(prev, prev) is None                       # nothing new
    assert new_messages(prev, prev[:1] + tools) is None           # the reply dropped
    assert new_messages(prev, [{"role": "system", "content": "s"}, *prev, *tools]) is None


def test_keys_and_streaming_are_refused(tok, kv_task):  # noqa: F811
    from posttrain.agent.byo.session import Session
    from posttrain.agent.harness import harness_for
    from posttrain.agent.live import Live
    from posttrain.types import Episode

    framer = ChatFramer(tok)
    live = Live(kv_task, Episode(kv_task.id, 0), None, harness=harness_for(kv_task, "tools", framer))
    with RolloutEndpoint() as endpoint:
        key = endpoint.register(Session(live, framer, None, SamplingParams(), CFG, None))
        body = {"messages": [{"role": "user", "content": "hi"}]}
        wrong = httpx.post(f"{endpoint.url}/chat/completions", json=body,
                           headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["type"] == "authentication_error"
        right = {"Authorization": f"Bearer {key}"}
        streamed = httpx.post(f"{endpoint.url}/chat/completions", json={**body, "stream": True},
                              headers=right)
        assert streamed.status_code == 400 and "stream" in streamed.json()["error"]["message"]
        task = httpx.get(f"{endpoint.url}/task", headers=right).json()
        assert task["instruction"].startswith("Store 7")
        assert [t["function"]["name"] for t in task["tools"]] == ["kv_set", "kv_get", "submit"]


def test_an_agent_past_its_timeout_is_killed_with_its_children(tok, kv_task, tmp_path):  # noqa: F811
    kv_task.config.agent.timeout_sec = 1.0
    pidfile = tmp_path / "child.pid"
    hang = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '60']); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    t0 = time.monotonic()
    ep = _run(tok, kv_task, REPLIES, lambda e: run_byo_episodes(
        [(kv_task, 0)], e, ChatFramer(tok), SamplingParams(), CFG, [sys.executable, "-c", hang]))
    assert ep.status == "agent_timeout" and ep.reward == 0.0
    assert time.monotonic() - t0 < 15
    child = int(pidfile.read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)


def test_an_agent_that_fails_is_a_model_error(tok, kv_task):  # noqa: F811
    crash = "import sys; sys.stderr.write('boom: no model'); sys.exit(3)"
    ep = _run(tok, kv_task, REPLIES, lambda e: run_byo_episodes(
        [(kv_task, 0)], e, ChatFramer(tok), SamplingParams(), CFG, [sys.executable, "-c", crash]))
    assert ep.status == "model_error" and "boom: no model" in ep.error and "exited 3" in ep.error


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]



def test_rl_env_runs_the_program_agent_program_names(tok, kv_task):  # noqa: F811
    from posttrain.rollout.envs import SandboxEnv
    from posttrain.schedule.sampler import GroupJob

    env = SandboxEnv([kv_task], ChatFramer(tok), CFG.model_copy(update={"program": EXAMPLE}), 1)
    ep = _run(tok, kv_task, REPLIES, lambda e: env.run([GroupJob(0, 0, kv_task.id, 0)], e)[0])
    assert ep.reward == 1.0 and [t.kind for t in ep.turns][-2:] == ["tool", "submit"]
    assert sum(ep.loss_mask) > 0 and "byo_history_rewrites" not in ep.timings
