"""The tool-calling harness: calls parsed from the model's own format, checked against the
declared schemas, run by the task's tool program in a real sandbox, failures counted."""

import json

import pytest
from engine_server import ScriptedEngineServer

from posttrain.agent import loop
from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.demos import demo_episode, play_oracle
from posttrain.agent.harness import harness_for
from posttrain.agent.harness.calls import parse_calls
from posttrain.toolcalls import read_calls
from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.openai import RemoteEngine
from posttrain.errors import TaskError
from posttrain.tasks import read_task
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.task import Task, write_task
from posttrain.tasks.tools import parse_tools

SET_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"},
                                               "value": {"type": "integer"}},
              "required": ["key", "value"], "additionalProperties": False}
TOOLS = {"command": "python3 /app/kv.py", "tools": [
    {"name": "kv_set", "description": "Store an integer under a key.", "parameters": SET_SCHEMA},
    {"name": "kv_get", "description": "Read a key.", "parameters": {
        "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}]}
KV = """import json, os, sys
p = "/app/state.json"
s = json.load(open(p)) if os.path.exists(p) else {}
a = json.loads(os.environ["TOOL_ARGS"])
if sys.argv[1] == "kv_set":
    s[a["key"]] = a["value"]; json.dump(s, open(p, "w")); print("ok")
else:
    print(s.get(a["key"], "error: no such key"))
"""
TEST = """#!/bin/bash
mkdir -p /logs/verifier
python3 -c 'import json; s = json.load(open("/app/state.json")); print(float(s.get("b") == 7))' \\
  > /logs/verifier/reward.txt 2>/dev/null || echo 0 > /logs/verifier/reward.txt
"""
SPECS = {t["name"]: t for t in TOOLS["tools"]} | {"submit": {"name": "submit", "parameters": {
    "type": "object"}}}


@pytest.fixture
def kv_task(tmp_path):
    config = TaskConfig.model_validate({"task": {"name": "posttrain/kv"},
                                        "agent": {"timeout_sec": 60.0}})
    files = {"tools.json": json.dumps(TOOLS), "environment/Dockerfile":
             "FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n", "environment/app/kv.py": KV,
             "tests/test.sh": TEST, "solution/solve.sh": "#!/bin/bash\n",
             "solution/steps.json": json.dumps([{"name": "kv_set",
                                                 "arguments": {"key": "b", "value": 7}}])}
    write_task(Task("kv", "Store 7 under the key b.\n", config, tmp_path, files), tmp_path)
    return read_task(tmp_path / "kv")


@pytest.mark.parametrize("text, kinds", [
    ('<tool_call>[{"name": "kv_get", "arguments": {"key": "a"}}]</tool_call>', ["tool"]),
    ('<tool_call>{"name": "kv_get", "arguments": {"key": "a"}}</tool_call>', ["tool"]),
    ('<tool_call>{"name": "kv_get", "arguments": "{\\"key\\": \\"a\\"}"}', ["tool"]),  # no close tag
    ('<tool_call>{"name": "kv_get", "arguments": {"key": </tool_call>', ["bad_json"]),
    ('<tool_call>{"name": "rm", "arguments": {}}</tool_call>', ["unknown_tool"]),
    ('<tool_call>{"name": "kv_set", "arguments": {"key": "a", "value": "7"}}</tool_call>',
     ["bad_arguments"]),
    ("I will read the key a.", ["no_tool_call"]),
    ('<tool_call>[{"name": "kv_get", "arguments": {"key": "a"}}, {"name": "submit"}]</tool_call>',
     ["tool", "submit"]),
])
def test_calls_parse_in_either_form_and_fail_with_a_reason(text, kinds):
    actions = parse_calls(text, SPECS)
    assert [a.kind for a in actions] == kinds
    assert all(a.hint for a in actions if a.kind not in ("tool", "submit"))


def test_at_most_four_calls_a_reply_and_raw_text_kept_for_bad_blocks():
    text = "".join('<tool_call>{"name": "kv_get", "arguments": {"key": "a"}}</tool_call>'
                   for _ in range(6))
    assert len(parse_calls(text, SPECS)) == 4
    assert read_calls("<tool_call>not json</tool_call>") == ["not json"]


def test_tools_json_is_checked():
    with pytest.raises(TaskError, match="command"):
        parse_tools('{"tools": []}', "t/tools.json")
    with pytest.raises(TaskError, match="added by the harness"):
        parse_tools('{"command": "x", "tools": [{"name": "submit"}]}', "t/tools.json")
    with pytest.raises(TaskError, match="not valid JSON"):
        parse_tools("{", "t/tools.json")


def _episode(tok, task, replies, **cfg):
    server = ScriptedEngineServer(tok, replies)
    engine = RemoteEngine(server.url, "scripted", timeout=5)
    try:
        ep, = loop.run_episodes([(task, 0)], engine, ChatFramer(tok), SamplingParams(seed=0),
                                AgentConfig(max_turns=6, sandbox_backend="bwrap", **cfg))
    finally:
        engine.close()
        server.stop()
    return ep


def test_an_episode_under_the_tools_harness(tok, kv_task):
    ep = _episode(tok, kv_task, [
        '<tool_call>[{"name": "kv_set", "arguments": {"key": "b", "value": "7"}}]</tool_call>',
        '<tool_call>[{"name": "kv_sett", "arguments": {}}]</tool_call>',
        "ok",
        '<tool_call>[{"name": "kv_set", "arguments": {"key": "b", "value": 7}}]</tool_call>',
        '<tool_call>[{"name": "submit", "arguments": {}}]</tool_call>'])
    assert ep.status == "ok" and ep.reward == 1.0
    assert [t.kind for t in ep.turns] == ["bad_arguments", "unknown_tool", "no_tool_call",
                                          "tool", "submit"]
    assert ep.parse_failures() == {"bad_arguments": 1, "unknown_tool": 1, "no_tool_call": 1}
    assert ep.turns[3].observation == "ok" and ep.turns[3].action.startswith("kv_set")
    prompt = tok.decode(ep.tokens[:ep.prompt_len])
    assert '"name": "kv_set"' in prompt and "<tool_call>" in prompt      # tools in the system prompt
    assert [s.attributes.get("tool") for s in ep.steps if s.kind == "tool"] == ["kv_set"]


def test_the_text_harness_is_kept_where_asked(tok, kv_task):
    ep = _episode(tok, kv_task, ["<submit/>"], harness="text")
    assert [t.kind for t in ep.turns] == ["submit"] and ep.reward == 0.0


def test_oracle_demo_goes_through_the_same_harness(tok, kv_task):
    t = play_oracle(kv_task, AgentConfig(sandbox_backend="bwrap"))
    assert t.reward == 1.0 and t.observations == ["ok"]
    assert t.replies[-1] == '<tool_call>[{"name": "submit", "arguments": {}}]</tool_call>'
    ep = demo_episode(t, ChatFramer(tok))
    sampled = tok.decode([x for x, m in zip(ep.tokens, ep.loss_mask) if m])
    assert sampled.count("<tool_call>") == 2 and "ok" not in sampled       # tool output masked
    assert harness_for(kv_task, "auto", ChatFramer(tok)).name == "tools"


QWENISH = ("{% if tools %}{{'<|im_start|>system\\n' + messages[0]['content'] + '\\n<tools>'}}"
           "{% for t in tools %}{{ '\\n' + (t | tojson) }}{% endfor %}{{'\\n</tools><|im_end|>\\n'}}"
           "{% else %}{{'<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n'}}"
           "{% endif %}{% for m in messages[1:] %}{{'<|im_start|>' + m['role'] + '\\n' + "
           "m['content'] + '<|im_end|>\\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}")


def test_a_template_that_renders_tools_gets_them_and_hermes_calls(kv_task):
    from posttrain.agent.framing import TemplateFramer
    from posttrain.models.tiny import build_tokenizer

    tok = build_tokenizer(["<tool_call> kv_set hello"] * 10, vocab_size=300)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = QWENISH
    framer = TemplateFramer(tok)
    h = harness_for(kv_task, "auto", framer)
    assert framer.renders_tools and h.native
    prompt = tok.decode(h.prompt(framer, "Store 7."))
    assert '"name": "kv_set"' in prompt and "Reply with one tool call" not in prompt
    assert h.render({"name": "kv_get", "arguments": {"key": "b"}}) == \
        '<tool_call>{"name": "kv_get", "arguments": {"key": "b"}}</tool_call>'
    assert tok.decode(h.observation(framer, "ok")).startswith("\n<|im_start|>tool\nok<|im_end|>")
