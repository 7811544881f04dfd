"""Token ids to reply text: which special tokens show, stop strings cut out, and streaming
deltas that never emit half a UTF-8 character or the start of a stop string.

By default special tokens are hidden except the agent's action tokens (`<bash>`, `</bash>`,
`<submit/>`), which are the reply itself for posttrain's own models; `skip_special_tokens`
true hides them too, false shows every token (`<|end|>` included).
"""

from __future__ import annotations

from posttrain.models.tiny import ACTION_TOKENS


class Detokenizer:
    def __init__(self, tokenizer, skip_special_tokens: bool | None = None):
        self.tokenizer = tokenizer
        self.hidden: set[int] = set()
        if tokenizer is not None and skip_special_tokens is not False:
            self.hidden = set(tokenizer.all_special_ids)
            if skip_special_tokens is None:
                vocab = tokenizer.get_vocab()
                self.hidden -= {vocab[t] for t in ACTION_TOKENS if t in vocab}

    def text(self, ids: list[int]) -> str:
        if self.tokenizer is None:
            return ""
        return self.tokenizer.decode([i for i in ids if i not in self.hidden], skip_special_tokens=False)

    def token(self, token_id: int) -> str:
        """One token as a string (hidden special tokens included: logprobs list every token)."""
        return str(token_id) if self.tokenizer is None else self.tokenizer.decode([token_id])


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """text up to the earliest stop string (excluded, as OpenAI does); whether one was found."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return (text[: min(hits)], True) if hits else (text, False)


def stop_prefix_len(text: str, stops: list[str]) -> int:
    """Length of the longest end of text that could be the start of a stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


class TextStream:
    """Incremental reply text: each push returns only text that is final."""

    def __init__(self, detok: Detokenizer, stops: list[str]):
        self.detok = detok
        self.stops = stops
        self.ids: list[int] = []
        self.sent = ""
        self.stopped = False

    def push(self, ids: list[int], final: bool) -> str:
        if self.stopped:
            return ""
        self.ids.extend(ids)
        text, self.stopped = cut_at_stop(self.detok.text(self.ids), self.stops)
        if not (final or self.stopped):
            if text.endswith("\ufffd"):
                return ""
            text = text[: len(text) - stop_prefix_len(text, self.stops)]
        if len(text) <= len(self.sent):
            return ""
        delta, self.sent = text[len(self.sent) :], text
        return delta
