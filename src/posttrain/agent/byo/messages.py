"""OpenAI chat messages as the rollout endpoint reads and writes them: compared, framed, replied.

A request extends the previous one when its messages are the previous request's, then the reply
the endpoint returned, then only new `tool`/`user` messages (`new_messages`). Messages compare by
role, text and tool calls (name and arguments as JSON values); ids and whitespace in the
arguments' JSON do not count, so an SDK that re-serialises them still extends.
"""

from __future__ import annotations

import json

from posttrain.agent.harness.calls import MAX_CALLS_PER_REPLY
from posttrain.toolcalls import call_blocks

OBSERVATION_ROLES = ("tool", "user")


def text_of(content) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _arguments(raw) -> str:
    """Arguments as canonical JSON (keys sorted), or as written if they are not JSON."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return json.dumps(raw, sort_keys=True)


def key(message: dict) -> tuple:
    """What makes two messages the same turn: role, text, tool calls (name, arguments)."""
    calls = tuple((c.get("function", {}).get("name"), _arguments(c.get("function", {}).get("arguments")))
                  for c in message.get("tool_calls") or ())
    return message.get("role"), text_of(message.get("content")), calls


def new_messages(previous: list[dict], messages: list[dict]) -> list[dict] | None:
    """The messages after `previous` (the last request's, then its reply), if `messages` extends
    it with tool/user messages only; None where the agent rewrote or truncated its history."""
    head, tail = messages[:len(previous)], messages[len(previous):]
    if len(head) < len(previous) or [key(m) for m in head] != [key(m) for m in previous]:
        return None
    if not tail or any(m.get("role") not in OBSERVATION_ROLES for m in tail):
        return None
    return tail


def observations(tail: list[dict]) -> list[tuple[str, str]]:
    """(role, text) per observation: tool messages in a row joined with newlines as one, the way
    the built-in loop joins the results of one reply's calls; each user message on its own."""
    out: list[tuple[str, str]] = []
    for i, m in enumerate(tail):
        text = text_of(m.get("content"))
        if m["role"] == "tool" and i > 0 and tail[i - 1]["role"] == "tool":
            out[-1] = ("tool", out[-1][1] + "\n" + text)
        else:
            out.append((m["role"], text))
    return out


def frame_observation(harness, framer, role: str, text: str) -> list[int]:
    """A tool result as the harness frames observations; a user message as a user turn."""
    return harness.observation(framer, text) if role == "tool" else framer.observation(text, "user")


def frame_conversation(harness, framer, messages: list[dict]) -> list[int]:
    """The whole conversation framed afresh (a first request, or history the agent rewrote):
    the harness's prompt for the first user message (its system prompt and tools, not the
    agent's), then each later assistant message as a reply and each tool/user run as above."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first is None:
        raise ValueError("the messages hold no user message (the task's instruction)")
    if messages[-1].get("role") not in OBSERVATION_ROLES:
        raise ValueError("the last message must be a user or tool message")
    ids = harness.prompt(framer, text_of(messages[first]["content"]))
    rest, i = messages[first + 1:], 0
    while i < len(rest):
        m = rest[i]
        if m.get("role") == "assistant":
            ids += framer.reply(assistant_text(harness, m))
            i += 1
            continue
        j = i
        while j < len(rest) and rest[j].get("role") != "assistant":
            j += 1
        for role, text in observations([x for x in rest[i:j] if x.get("role") in OBSERVATION_ROLES]):
            ids += frame_observation(harness, framer, role, text)
        i = j
    return ids


def assistant_text(harness, message: dict) -> str:
    """An assistant message as the model would have written it: its text, then its calls."""
    calls = []
    for c in message.get("tool_calls") or ():
        fn = c.get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {}
        calls.append(harness.render({"name": fn.get("name", ""), "arguments": args}))
    return text_of(message.get("content")) + "".join(calls)


def reply_message(text: str, terminated: bool, turn: int) -> tuple[dict, str]:
    """(the assistant message, finish_reason) for a sampled reply: its `<tool_call>` blocks as
    structured tool_calls (at most MAX_CALLS_PER_REPLY, as the harness reads them), the rest as
    content. A block that is not a JSON call stays out of tool_calls (it is a bad_json failure)."""
    blocks = call_blocks(text)
    calls = [c for _, cs in blocks for c in cs if isinstance(c, dict)][:MAX_CALLS_PER_REPLY]
    content, at = "", 0
    for m, _ in blocks:
        content, at = content + text[at:m.start()], m.end()
    content = (content + text[at:]).strip()
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{turn}_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": _as_json(c.get("arguments", {}))}}
            for i, c in enumerate(calls)]
    return message, "tool_calls" if calls else ("stop" if terminated else "length")


def _as_json(args) -> str:
    return args if isinstance(args, str) else json.dumps(args)
