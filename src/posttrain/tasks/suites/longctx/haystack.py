"""Haystack text and token counting for the longctx suite.

Filler is generated prose (no digits, no capitalized names beyond sentence starts)
so that needles stand out only by meaning. Tokens are counted with a real tokenizer
when one is given (a directory holding tokenizer.json, e.g. an imported
SmolLM2-135M-Instruct), else estimated as characters / 4.
"""

from __future__ import annotations

import random
from pathlib import Path

SUBJECTS = ("the old harbor", "a quiet village", "the northern forest", "the river delta",
            "an abandoned mill", "the mountain pass", "a small bakery", "the city library",
            "the night market", "a distant island", "the glass factory", "the winter garden")
VERBS = ("was known for", "slowly changed", "attracted", "was rebuilt after", "remembered",
         "depended on", "celebrated", "was shaped by", "lost interest in", "welcomed")
OBJECTS = ("its long summers", "travelling musicians", "the autumn storms", "careful craftsmen",
           "a forgotten festival", "the morning fog", "seasonal workers", "heavy rains",
           "patient fishermen", "curious visitors", "the evening bells", "its narrow streets")
TAILS = ("", " over many years", " without much notice", " in those days",
         " according to local stories", " more than anyone expected")


class Counter:
    """len(tokens) of a text: the tokenizer's if given, else chars / 4."""

    def __init__(self, tokenizer: str = "approx"):
        self.name = tokenizer
        self._tok = None
        if tokenizer != "approx":
            from tokenizers import Tokenizer

            path = Path(tokenizer)
            path = path / "tokenizer.json" if path.is_dir() else path
            if not path.is_file():
                from posttrain.errors import PosttrainError

                raise PosttrainError(f"knob tokenizer={tokenizer}: no such file {path} "
                                     "(give a tokenizer.json or its directory, or 'approx')")
            self._tok = Tokenizer.from_file(str(path))

    def __call__(self, text: str) -> int:
        if self._tok is None:
            return max(1, len(text) // 4)
        return _count(self._tok, text)


def _count(tok, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def sentence(rng: random.Random) -> str:
    s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(TAILS)}."
    return s[0].upper() + s[1:]


def filler(rng: random.Random, n_tokens: int, count: Counter) -> list[str]:
    """Sentences whose token counts sum to about n_tokens (counted per sentence)."""
    out, total = [], 0
    cache: dict[str, int] = {}
    while total < n_tokens:
        s = sentence(rng)
        if s not in cache:
            cache[s] = count(" " + s)
        out.append(s)
        total += cache[s]
    return out


def insert(sentences: list[str], needles: list[str], rng: random.Random) -> list[str]:
    """Needles placed at random depths (kept in their given order)."""
    out = list(sentences)
    spots = sorted(rng.randrange(len(out) + 1) for _ in needles)
    for k, (spot, needle) in enumerate(zip(spots, needles)):
        out.insert(spot + k, needle)
    return out


def paragraphs(sentences: list[str], rng: random.Random) -> str:
    out, i = [], 0
    while i < len(sentences):
        n = rng.randint(4, 9)
        out.append(" ".join(sentences[i:i + n]))
        i += n
    return "\n\n".join(out) + "\n"
