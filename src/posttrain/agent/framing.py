"""Text-protocol framing for checkpoints that bring their own chat template (e.g. SmolLM2's
ChatML), beside posttrain.agent.chat.ChatFramer for the embedded tiny tokenizer. `posttrain eval`,
`validate` and `rl` all frame through framer_for / single_turn, so a checkpoint is always
prompted in its own template.

The framing is derived from the tokenizer's own template, so any template works:
- prompt:       template([system, user], add_generation_prompt=True)
- observation:  what the template puts after an assistant reply's end token, then the
                observation as a `user` turn and the generation prompt.
Token-in/token-out as in ChatFramer: each piece is tokenised alone and appended.
"""

from __future__ import annotations

from posttrain.agent.chat import END, SYSTEM_PROMPT, ChatFramer
from posttrain.errors import PosttrainError
from posttrain.models.tiny import CHAT_TEMPLATE

_MARK = "\x00REPLY\x00"
_PROBE_TOOL = "posttrain_probe_tool"


def _probe_spec() -> dict:
    return {"type": "function", "function": {"name": _PROBE_TOOL, "description": "",
                                             "parameters": {"type": "object", "properties": {}}}}


class TemplateFramer:
    """Same interface as ChatFramer: prompt, observation, reply, decode_reply, end_id."""

    def __init__(self, tokenizer, system_prompt: str = SYSTEM_PROMPT, observation_role: str = "user"):
        if not getattr(tokenizer, "chat_template", None) or tokenizer.eos_token_id is None:
            raise PosttrainError("the checkpoint's tokenizer has no chat template or no eos token")
        self.tokenizer, self.system_prompt, self.role = tokenizer, system_prompt, observation_role
        self.end_id = tokenizer.eos_token_id
        end = tokenizer.eos_token
        base = [{"role": "system", "content": system_prompt}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": _MARK}]
        with_reply = self._render(base, False)
        after = with_reply[with_reply.index(_MARK) + len(_MARK):]
        if not after.startswith(end):
            raise PosttrainError("the chat template does not end assistant turns with the eos token")
        self._after_end = after[len(end):]
        self._base, self._with_reply = base, with_reply
        self._obs_parts = {observation_role: self._observation_parts(observation_role)}
        self.renders_tools = _PROBE_TOOL in self._render(base[:2], True, [_probe_spec()])

    def _render(self, messages, generation_prompt: bool, tools=None) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, tools=tools,
                                                  add_generation_prompt=generation_prompt)

    def _observation_parts(self, role: str) -> tuple[str, str]:
        full = self._render(self._base + [{"role": role, "content": _MARK}], True)
        tail = full[len(self._with_reply):]
        prefix, _, suffix = tail.partition(_MARK)
        return prefix, suffix

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def prompt(self, instruction: str, system: str | None = None, tools=None) -> list[int]:
        """tools: OpenAI-style specs for a template that renders them (renders_tools)."""
        system = self.system_prompt if system is None else system
        return self._encode(self._render([{"role": "system", "content": system},
                                          {"role": "user", "content": instruction.strip()}],
                                         True, tools))

    def observation(self, text: str, role: str | None = None) -> list[int]:
        """The observation as a turn of `role` (default: the framer's), then the reply's start."""
        role = role or self.role
        if role not in self._obs_parts:
            self._obs_parts[role] = self._observation_parts(role)
        prefix, suffix = self._obs_parts[role]
        return self._encode(self._after_end + prefix + text + suffix)

    def reply(self, text: str) -> list[int]:
        return self._encode(text) + [self.end_id]

    def decode_reply(self, ids: list[int]) -> tuple[str, bool]:
        terminated = bool(ids) and ids[-1] == self.end_id
        body = ids[:-1] if terminated else ids
        return self.tokenizer.decode(body, skip_special_tokens=False), terminated


def _is_embedded(tokenizer) -> bool:
    """The embedded tokenizer: its own template, or (older checkpoints) none but its tokens."""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        return template == CHAT_TEMPLATE
    vocab = tokenizer.get_vocab()
    return "<|end|>" in vocab and "<|tool|>" in vocab


def framer_for(tokenizer):
    """ChatFramer for the embedded tokenizer, else the checkpoint's own template's."""
    return ChatFramer(tokenizer) if _is_embedded(tokenizer) else TemplateFramer(tokenizer)


def embedded_user_turn(text: str) -> str:
    """One user turn in the embedded tokenizer's layout, up to where the reply starts."""
    return f"<|bos|><|user|>{text}{END}<|assistant|>"


def single_turn(tokenizer) -> tuple:
    """(frame, end_id) for one user turn without a system prompt: frame(text) is the prompt
    text ending where the reply starts, end_id the token that ends a reply. The embedded
    tokenizer's own layout, else the checkpoint's chat template (refused if it has none)."""
    if _is_embedded(tokenizer):
        return embedded_user_turn, tokenizer.convert_tokens_to_ids(END)
    end_id = TemplateFramer(tokenizer).end_id        # checks the template and the eos token
    return (lambda text: tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)), end_id
