"""Request bodies: `null` for an optional field means its default, as in OpenAI and vLLM."""

from posttrain.serve.protocol import ChatRequest, CompletionRequest

NULLS = {"temperature": None, "top_p": None, "n": None, "stream": None, "seed": None, "stop": None,
         "presence_penalty": None, "frequency_penalty": None, "max_tokens": None}


def test_null_optional_fields_take_their_defaults():
    chat = ChatRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], "logprobs": None,
                                       "top_logprobs": None, "parallel_tool_calls": None, **NULLS})
    assert (chat.temperature, chat.top_p, chat.n, chat.stream, chat.logprobs) == (1.0, 1.0, 1, False, False)
    done = CompletionRequest.model_validate({"prompt": "x", "logprobs": None, "echo": None, **NULLS})
    assert (done.temperature, done.n, done.echo, done.logprobs, done.token_limit()) == (1.0, 1, False, None, 16)
