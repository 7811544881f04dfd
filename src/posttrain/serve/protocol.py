"""OpenAI-compatible request bodies and the small helpers that turn them into engine calls.

Extensions beyond the OpenAI API (as vLLM names them): `top_k`, `stop_token_ids`, `ignore_eos`,
`return_token_ids` (each choice carries `token_ids`), and token-id prompts.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from posttrain.engine.base import SamplingParams

Prompt = Union[str, list[int], list[str], list[list[int]]]


class SamplingFields(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    n: int = Field(1, ge=1, le=256)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] = Field(default_factory=list)
    seed: int | None = None
    stream: bool = False
    return_token_ids: bool = True
    ignore_eos: bool = False

    def sampling_params(self, eos_id: int | None) -> SamplingParams:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        stop_ids = list(self.stop_token_ids)
        if eos_id is not None and not self.ignore_eos:
            stop_ids.append(eos_id)
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
            stop_token_ids=stop_ids, seed=self.seed, top_k=self.top_k, stop=stops,
        )


class CompletionRequest(SamplingFields):
    prompt: Prompt
    logprobs: int | None = None
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = ""


class ChatRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[dict] | None = None


def prompt_token_lists(prompt: Prompt, tokenizer) -> list[list[int]]:
    """Normalise the four OpenAI prompt shapes to a list of token-id lists."""
    if isinstance(prompt, str):
        prompt = [prompt]
    if prompt and all(isinstance(t, int) for t in prompt):
        return [list(prompt)]
    out = []
    for p in prompt:
        if isinstance(p, str):
            if tokenizer is None:
                raise ValueError("this server has no tokenizer: send token-id prompts")
            out.append(tokenizer.encode(p, add_special_tokens=False))
        else:
            out.append(list(p))
    if not out:
        raise ValueError("prompt is empty")
    return out


def chat_prompt(messages: list[ChatMessage], tokenizer, tools: list[dict] | None = None) -> list[int]:
    """Render messages (and tools, if the template takes them) ending with the assistant prompt."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ValueError("this model has no chat template")
    dicts = [m.model_dump(exclude_none=True) for m in messages]
    extra = {"tools": tools} if tools else {}
    ids = tokenizer.apply_chat_template(dicts, add_generation_prompt=True, tokenize=True, **extra)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str, list[dict]]:
    """Split Hermes/Qwen-style `<tool_call>{"name": .., "arguments": ..}</tool_call>` blocks
    out of a reply; returns (remaining content, OpenAI tool_calls). Malformed blocks stay text."""
    calls, kept, last = [], [], 0
    for m in TOOL_CALL.finditer(text):
        try:
            obj = json.loads(m.group(1))
            name, args = obj["name"], obj.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            continue
        kept.append(text[last : m.start()])
        last = m.end()
        arguments = args if isinstance(args, str) else json.dumps(args)
        calls.append({"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function", "function": {"name": name, "arguments": arguments}})
    kept.append(text[last:])
    return "".join(kept).strip() if calls else text, calls
