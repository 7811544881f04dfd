"""Request prompts to token ids: the four OpenAI completion prompt shapes, and chat messages
rendered with the model's own chat template."""

from __future__ import annotations

from posttrain.serve.protocol import ChatMessage, Prompt


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


def _message_dict(message: ChatMessage) -> dict:
    """The message as the template sees it; content parts are joined (text parts only)."""
    d = message.model_dump(exclude_none=True)
    if isinstance(d.get("content"), list):
        parts = d["content"]
        if any(p.get("type") != "text" for p in parts):
            raise ValueError("only text content parts are supported")
        d["content"] = "".join(p.get("text", "") for p in parts)
    if d["role"] == "developer":  # OpenAI's newer name for the system role
        d["role"] = "system"
    return d


def chat_prompt(messages: list[ChatMessage], tokenizer, tools: list[dict] | None = None) -> list[int]:
    """Render messages (and tools, if the template takes them) ending with the assistant prompt."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ValueError("this model has no chat template")
    dicts = [_message_dict(m) for m in messages]
    extra = {"tools": tools} if tools else {}
    ids = tokenizer.apply_chat_template(dicts, add_generation_prompt=True, tokenize=True, **extra)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)
