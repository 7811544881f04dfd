"""The official `openai` Python SDK against the server: completions, chat, streaming, tools,
logprobs and errors, parsed by the SDK's own response types."""

import pytest

from serve_helpers import chat_text, need, parse_args, tool_spec

openai = need("openai")


@pytest.fixture(scope="module")
def client(served):
    c = openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0, timeout=60)
    yield c
    c.close()


def _user(text):
    return [{"role": "user", "content": text}]


def test_models_list(client):
    (card,) = client.models.list().data
    assert card.id == "tiny-agent" and card.object == "model"
    assert client.models.retrieve("tiny-agent").id == "tiny-agent"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_completion(client):
    r = client.completions.create(model="tiny-agent", prompt=chat_text("list files"), max_tokens=12, temperature=0)
    assert r.choices[0].text == "<bash>ls -la</bash>" and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens >= 1 and r.object == "text_completion"


def test_chat(client):
    r = client.chat.completions.create(model="tiny-agent", messages=_user("are you done"), temperature=0)
    assert r.choices[0].message.content == "<submit/>" and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "stop"


def test_chat_stream_with_usage(client):
    stream = client.chat.completions.create(model="tiny-agent", messages=_user("list files"), temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "<bash>ls -la</bash>"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0


def test_completion_stream_with_stop(client):
    stream = client.completions.create(model="tiny-agent", prompt=chat_text("list files"), max_tokens=12,
                                       temperature=0, stop=["</bash>"], stream=True)
    assert "".join(c.choices[0].text for c in stream) == "<bash>ls -la"


def test_tool_call_round_trip(client):
    msgs = _user("weather in Paris")
    r = client.chat.completions.create(model="tiny-agent", messages=msgs, tools=tool_spec(), temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and parse_args(call) == {"city": "Paris"}
    msgs += [choice.message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    again = client.chat.completions.create(model="tiny-agent", messages=msgs, tools=tool_spec(), max_tokens=4)
    assert again.choices[0].message.role == "assistant"


def test_chat_logprobs(client):
    r = client.chat.completions.create(model="tiny-agent", messages=_user("list files"), temperature=0,
                                       logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content).startswith("<bash>ls")
    assert all(len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob for t in content)


def test_completion_logprobs_and_echo(client):
    r = client.completions.create(model="tiny-agent", prompt=chat_text("list files"), max_tokens=1,
                                  temperature=0, logprobs=1, echo=True)
    lp = r.choices[0].logprobs
    assert r.choices[0].text.startswith(chat_text("list files"))
    assert lp.token_logprobs[0] is None and all(x <= 0 for x in lp.token_logprobs[1:])
    assert len(lp.tokens) == len(lp.top_logprobs) == len(lp.text_offset)


def test_errors_are_sdk_exceptions(client):
    with pytest.raises(openai.NotFoundError, match="gpt-4o"):
        client.chat.completions.create(model="gpt-4o", messages=_user("hi"))
    with pytest.raises(openai.BadRequestError, match="presence_penalty"):
        client.chat.completions.create(model="tiny-agent", messages=_user("hi"), presence_penalty=1.0)


def test_streamed_tool_call(client):
    stream = client.chat.completions.create(model="tiny-agent", messages=_user("weather in Paris"),
                                            tools=tool_spec(), temperature=0, stream=True)
    chunks = list(stream)
    calls = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert [c.function.name for c in calls] == ["get_weather"] and parse_args(calls[0]) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ""
