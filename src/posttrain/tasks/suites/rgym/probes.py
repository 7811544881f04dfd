"""Replies scored like a model's by `posttrain validate` (validate/replies.py) on reasoning-gym
tasks, each a function task -> reply text.

PROBES (hacks: not solved, at most half the reward): question_in_tags, the question itself
given as the answer (the default `score_answer` pays for an answer that contains the right one).
PARTIAL (partial credit where the dataset's scorer gives it): answer_in_a_sentence, the right
answer inside a sentence. The generic probes (the empty reply, "OK.", the instruction echoed)
are validate's own.
"""

from __future__ import annotations

import json

from posttrain.tasks import Task


def _entry(task: Task) -> dict:
    return json.loads(task.config.metadata["entry"])


def question_in_tags(task: Task) -> str:
    return f"<answer>{_entry(task)['question']}</answer>"


def answer_in_a_sentence(task: Task) -> str:
    return f"<answer>I think the answer is {_entry(task)['answer']}, but I am not sure.</answer>"


PROBES = {"question_in_tags": question_in_tags}
PARTIAL = {"answer_in_a_sentence": answer_in_a_sentence}
