"""Replies that must not be rewarded as solutions of an instruct task (single-turn probes:
each a function task -> reply text, scored like a model's reply by `posttrain validate`).

echo: the instruction itself. plain: the request answered with every constraint ignored.
stuff: every word the constraints name (keywords, phrases, markers) and nothing else.
"""

from __future__ import annotations

from posttrain.tasks import Task
from posttrain.tasks.suites.instruct.requests import plain_reply, requests


def echo(task: Task) -> str:
    return task.instruction


def plain(task: Task) -> str:
    by_id = {r.id: r for split in ("train", "heldout") for r in requests(split)}
    return plain_reply(by_id[task.config.metadata["request"]])


def stuff(task: Task) -> str:
    words = []
    for c in task.config.metadata["constraints"]:
        for v in c["kwargs"].values():
            words += v if isinstance(v, list) else [v] if isinstance(v, str) else []
    return " ".join(words) or "ok"


PROBES = {"echo": echo, "plain": plain, "stuff": stuff}
