"""The oracle reply as a draft that each constraint edits, rendered to text in one fixed order:
title, the body (paragraphs or sections of sentences), bullets, postscript, end phrase; then
the whole-text edits: forbidden words removed, commas removed, case, quotation marks, JSON.
The checker, not this file, decides whether the result meets the constraints."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


@dataclass
class Draft:
    body: list[str]                                      # sentences that may be dropped
    required: list[str] = field(default_factory=list)   # sentences that must stay (keywords, ...)
    title: str | None = None
    bullets: list[str] = field(default_factory=list)
    paragraphs: int = 1                                  # body groups split by ***
    sections: tuple[str, int] | None = None              # (splitter, count)
    start: str | None = None                             # the first sentence
    postscript: str | None = None
    end: str | None = None
    forbidden: list[str] = field(default_factory=list)
    no_comma: bool = False
    case: str | None = None                              # "lower" or "upper"
    quote: bool = False
    as_json: bool = False


def _groups(sentences: list[str], n: int) -> list[list[str]]:
    """sentences in n consecutive non-empty groups (as even as possible)."""
    n = max(1, min(n, len(sentences)))
    size, extra = divmod(len(sentences), n)
    out, i = [], 0
    for g in range(n):
        step = size + (g < extra)
        out.append(sentences[i:i + step])
        i += step
    return out


def _body_blocks(d: Draft) -> list[str]:
    sentences = ([d.start] if d.start else []) + d.body[:1] + d.required + d.body[1:]
    if d.sections:
        splitter, n = d.sections
        return [f"{splitter} {i + 1}\n" + " ".join(g) for i, g in enumerate(_groups(sentences, n))]
    return [" ".join(g) for g in _groups(sentences, d.paragraphs)]


def _drop_words(text: str, words: list[str]) -> str:
    for w in words:
        text = re.sub(rf"\s*\b{re.escape(w)}\b", "", text, flags=re.IGNORECASE)
    return re.sub(r"(^|\n) +", r"\1", text)


def render(d: Draft) -> str:
    blocks = _body_blocks(d)
    if d.title:
        blocks[0] = f"<<{d.title}>>\n" + blocks[0]
    tail = [("\n".join(f"* {b}" for b in d.bullets))] if d.bullets else []
    closing = " ".join(x for x in (d.postscript, d.end) if x)
    if d.paragraphs > 1:
        text = "\n\n***\n\n".join(blocks[:-1] + ["\n\n".join([blocks[-1], *tail])])
    else:
        text = "\n\n".join(blocks + tail)
    if closing:
        text += ("\n\n" if d.postscript else " ") + closing
    text = _drop_words(text, d.forbidden)
    if d.no_comma:
        text = text.replace(",", "")
    if d.case:
        text = text.lower() if d.case == "lower" else text.upper()
    if d.quote:
        text = f'"{text}"'
    return json.dumps({"response": text}) if d.as_json else text
