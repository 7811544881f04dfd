"""The oracle reply of a task: the base request's content in a draft that each family edits
(families.py), rendered once (draft.py); the arguments that depend on the text (a word count,
a paragraph count) are then set from it."""

from __future__ import annotations

from posttrain.tasks.suites.instruct.draft import Draft, render
from posttrain.tasks.suites.instruct.families import FAMILIES
from posttrain.tasks.suites.instruct.requests import Request


def oracle_reply(request: Request, names: list[str], kwargs: list[dict]) -> tuple[str, list[dict]]:
    """The reply built to meet the constraints, and their arguments with the derived ones set."""
    draft = Draft(body=[request.opener, *request.subject.sentences])
    for name, kw in zip(names, kwargs):
        FAMILIES[name].shape(draft, kw, request)
    text = render(draft)
    settled = [FAMILIES[n].settle(text, kw) if FAMILIES[n].settle else kw
               for n, kw in zip(names, kwargs)]
    return text, settled
