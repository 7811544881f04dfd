"""The constraint families: which IFEval checker (if-verifiable's copy) each one uses, how its
arguments are drawn, and how the oracle draft meets it.

Left out, and why: length in sentences and capital-word counts (their checkers need NLTK's
punkt data, which no PyPI package ships and which may not be downloaded at run time),
response language, letter frequency, repeat-prompt and two-responses.
"""

from __future__ import annotations

import random
import re
from typing import Callable, NamedTuple

from posttrain.tasks.suites.instruct.draft import Draft
from posttrain.tasks.suites.instruct.requests import Request

KEYWORDS = ("lantern", "compass", "velvet", "pepper", "ribbon", "marble", "thunder", "orchard",
            "puzzle", "candle", "feather", "violin", "meadow", "anchor", "saffron", "glacier")
FILLERS = ("really", "very", "just", "also", "actually", "honestly")
STARTS = ("today", "first", "well", "recently", "here", "so")
ENDINGS = ("Any other questions?", "Is there anything else I can help with?",
           "That is all for now", "Talk soon", "Thanks for reading")
PLACEHOLDERS = ("[name]", "[date]", "[address]", "[time]", "[place]")
HIGHLIGHTS = ("plan ahead", "stay curious", "take your time")
COUNT_LINES = ("I thought about the {w}.", "The {w} stayed with me.", "Nothing beats the {w}.",
               "Every {w} tells a story.")


class Family(NamedTuple):
    checker: str                                               # if-verifiable ifeval id
    draw: Callable[[random.Random, Request], dict]             # its arguments
    shape: Callable[[Draft, dict, Request], None]              # edit the oracle's draft
    settle: Callable[[str, dict], dict] | None = None          # arguments set from the oracle text


def _fresh_words(rng: random.Random, request: Request, k: int) -> list[str]:
    text = " ".join(request.subject.sentences).lower()
    return rng.sample([w for w in KEYWORDS if w not in text], k)


def _keywords(rng, req):
    return {"keywords": sorted(_fresh_words(rng, req, 2))}


def _shape_keywords(d, kw, req):
    a, b = kw["keywords"]
    d.required.append(f"It somehow reminds me of a {a} and a {b}.")


def _frequency(rng, req):
    return {"keyword": _fresh_words(rng, req, 1)[0], "frequency": rng.randint(2, 4), "relation": "at least"}


def _shape_frequency(d, kw, req):
    d.required += [line.format(w=kw["keyword"]) for line in COUNT_LINES[:kw["frequency"]]]


def _forbidden(rng, req):
    present = [w for w in FILLERS if re.search(rf"\b{w}\b", " ".join(req.subject.sentences), re.I)]
    return {"forbidden_words": sorted(rng.sample(present, min(2, len(present))))}


def _shape_forbidden(d, kw, req):
    d.forbidden += kw["forbidden_words"]


def _words(rng, req):
    return {"relation": rng.choice(("less than", "at least"))}


def _shape_words(d, kw, req):
    if kw["relation"] == "less than":
        del d.body[3:]                          # a short reply
    else:
        d.body += [f"To sum up, {tip} is my best suggestion." for tip in req.subject.tips]


def _settle_words(oracle: str, kw: dict) -> dict:
    from if_verifiable.ifeval.instructions_util import count_words

    n = count_words(oracle)
    # less than: just above the oracle's count; at least: at the oracle's count, rounded down
    num = n + 5 - n % 5 if kw["relation"] == "less than" else n - n % 5
    return {"num_words": num, "relation": kw["relation"]}


def _paragraphs(rng, req):
    return {"num_paragraphs": rng.randint(2, 4)}


def _shape_paragraphs(d, kw, req):
    d.paragraphs = kw["num_paragraphs"]


def _start(rng, req):
    return {"first_word": rng.choice(STARTS), "nth_paragraph": 1}


def _shape_start(d, kw, req):
    d.start = f"{kw['first_word'].capitalize()} I would like to share a few thoughts."


def _settle_start(oracle: str, kw: dict) -> dict:
    n = sum(1 for p in re.split(r"\n\n", oracle) if p.strip())
    return {"num_paragraphs": n, **kw}


def _bullets(rng, req):
    return {"num_bullets": rng.randint(2, 4)}


def _shape_bullets(d, kw, req):
    d.bullets = [t.capitalize() + "." for t in req.subject.tips[:kw["num_bullets"]]]


def _sections(rng, req):
    return {"section_spliter": rng.choice(("Section", "SECTION")), "num_sections": rng.randint(2, 3)}


def _shape_sections(d, kw, req):
    d.sections = (kw["section_spliter"], kw["num_sections"])


def _highlights(rng, req):
    return {"num_highlights": rng.randint(1, 3)}


def _shape_highlights(d, kw, req):
    marks = ", ".join(f"*{h}*" for h in HIGHLIGHTS[:kw["num_highlights"]])
    d.required.append(f"My advice is simple: {marks}.")


def _placeholders(rng, req):
    return {"num_placeholders": rng.randint(1, 3)}


def _shape_placeholders(d, kw, req):
    d.required.append("Details: " + " ".join(PLACEHOLDERS[:kw["num_placeholders"]]) + ".")


def _postscript(rng, req):
    return {"postscript_marker": rng.choice(("P.S.", "P.P.S"))}


def _shape_postscript(d, kw, req):
    d.postscript = f"{kw['postscript_marker']} I hope to hear from you soon."


def _end(rng, req):
    return {"end_phrase": rng.choice(ENDINGS)}


def _shape_end(d, kw, req):
    d.end = kw["end_phrase"]


def _title(rng, req):
    return {}


def _shape_title(d, kw, req):
    d.title = req.subject.title


def _none(rng, req):
    return {}


def _setter(attr: str, value) -> Callable[[Draft, dict, Request], None]:
    return lambda d, kw, req: setattr(d, attr, value)


FAMILIES = {
    "lowercase": Family("change_case:english_lowercase", _none, _setter("case", "lower")),
    "uppercase": Family("change_case:english_capital", _none, _setter("case", "upper")),
    "keywords": Family("keywords:existence", _keywords, _shape_keywords),
    "keyword_count": Family("keywords:frequency", _frequency, _shape_frequency),
    "forbidden": Family("keywords:forbidden_words", _forbidden, _shape_forbidden),
    "words": Family("length_constraints:number_words", _words, _shape_words, _settle_words),
    "paragraphs": Family("length_constraints:number_paragraphs", _paragraphs, _shape_paragraphs),
    "start": Family("length_constraints:nth_paragraph_first_word", _start, _shape_start, _settle_start),
    "bullets": Family("detectable_format:number_bullet_lists", _bullets, _shape_bullets),
    "sections": Family("detectable_format:multiple_sections", _sections, _shape_sections),
    "highlights": Family("detectable_format:number_highlighted_sections", _highlights, _shape_highlights),
    "json": Family("detectable_format:json_format", _none, _setter("as_json", True)),
    "title": Family("detectable_format:title", _title, _shape_title),
    "quotation": Family("startend:quotation", _none, _setter("quote", True)),
    "end": Family("startend:end_checker", _end, _shape_end),
    "postscript": Family("detectable_content:postscript", _postscript, _shape_postscript),
    "no_comma": Family("punctuation:no_comma", _none, _setter("no_comma", True)),
    "placeholders": Family("detectable_content:number_placeholders", _placeholders, _shape_placeholders),
}


def conflicting(names: list[str]) -> bool:
    """Whether two of the families exclude each other (IFEval's own conflict table)."""
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_CONFLICTS

    ids = [FAMILIES[n].checker for n in names]
    return any(b in INSTRUCTION_CONFLICTS.get(a, ()) or a in INSTRUCTION_CONFLICTS.get(b, ())
               for i, a in enumerate(ids) for b in ids[i + 1:])
