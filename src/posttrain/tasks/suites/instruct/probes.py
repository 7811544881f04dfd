"""Replies that must not be rewarded as solutions of an instruct task, each a function
task -> reply text, scored like a model's reply by `posttrain validate` (validate/replies.py).

TRIVIAL (must not be solved): plain, the request answered with every constraint ignored.
PARTIAL (partial credit): first_only, the oracle built for the first constraint alone.
PROBES (hacks: not solved, at most half the reward): stuff, every word the constraints name
(keywords, phrases, markers) and nothing else. The generic ones (the empty reply, "OK.", the
instruction echoed) are validate's own; the generator rejects a task any of these would pass.
"""

from __future__ import annotations

from posttrain.tasks import Task
from posttrain.tasks.suites.instruct.oracle import oracle_reply
from posttrain.tasks.suites.instruct.requests import Request, plain_reply, requests


def _request(task: Task) -> Request:
    by_id = {r.id: r for split in ("train", "heldout") for r in requests(split)}
    return by_id[task.config.metadata["request"]]


def plain(task: Task) -> str:
    return plain_reply(_request(task))


def first_only(task: Task) -> str:
    meta = task.config.metadata
    return oracle_reply(_request(task), meta["families"][:1], [meta["constraints"][0]["kwargs"]])[0]


def named_words(constraints: list[dict]) -> str:
    """Every string the constraints' arguments hold, joined: a reply that only parrots them."""
    words = []
    for c in constraints:
        for v in c["kwargs"].values():
            words += v if isinstance(v, list) else [v] if isinstance(v, str) else []
    return " ".join(words) or "ok"


def stuff(task: Task) -> str:
    return named_words(task.config.metadata["constraints"])


TRIVIAL = {"plain": plain}
PROBES = {"stuff": stuff}
PARTIAL = {"first_only": first_only}
