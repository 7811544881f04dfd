"""Token-in/token-out chat framing. Text is never re-tokenised between turns.

Layout (matches the tokenizer's chat template):
<|bos|><|system|>SYSTEM<|end|><|user|>INSTRUCTION<|end|><|assistant|>REPLY<|end|>
<|tool|>OBSERVATION<|end|><|assistant|>REPLY<|end|> ...
Each observation is tokenised alone and appended; sampled ids are kept as sampled.
"""

from __future__ import annotations

SYSTEM_PROMPT = ("You are a terminal agent in a Linux sandbox. Each reply is one shell "
                 "command as <bash>COMMAND</bash>, or <submit/> when the task is done.")
END = "<|end|>"


class ChatFramer:
    """Turns instructions, observations and demo replies into token ids."""

    def __init__(self, tokenizer, system_prompt: str = SYSTEM_PROMPT):
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.end_id = tokenizer.convert_tokens_to_ids(END)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    renders_tools = False     # a harness lists its tools in the system prompt

    def prompt(self, instruction: str, system: str | None = None, tools=None) -> list[int]:
        return self._encode(f"<|bos|><|system|>{self.system_prompt if system is None else system}"
                            f"{END}<|user|>{instruction.strip()}{END}<|assistant|>")

    def observation(self, text: str, role: str | None = None) -> list[int]:
        """Every observation is a <|tool|> turn in this layout, whatever the role."""
        return self._encode(f"<|tool|>{text}{END}<|assistant|>")

    def reply(self, text: str) -> list[int]:
        """A demonstration reply, as the model should produce it (ends with <|end|>)."""
        return self._encode(text + END)

    def decode_reply(self, ids: list[int]) -> tuple[str, bool]:
        """(text without the end token, whether the end token was produced)."""
        terminated = bool(ids) and ids[-1] == self.end_id
        body = ids[:-1] if terminated else ids
        return self.tokenizer.decode(body, skip_special_tokens=False), terminated
