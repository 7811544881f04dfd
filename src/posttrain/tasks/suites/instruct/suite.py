"""The `instruct` suite: single-turn writing requests with one to three verifiable constraints
(IFEval's checkers), scored on the host from the reply text: reward = the fraction met,
`strict` = all met (score.py).

A task draws a base request (requests.py) and a combination of families (families.py), builds
the oracle reply that meets them (draft.py) and keeps the task only when the checker agrees:
the oracle meets every constraint, the plain reply (the request answered, the constraints
ignored), the empty reply and "OK." fail at least one, and echoing the instruction or parroting
the constraints' words (probes.py) meets at most half and not all.

Held out twice over: the heldout split uses only held-out base requests (requests.HELDOUT) and,
for two or three constraints, only held-out combinations (a fixed hash of the sorted family
names); train uses neither. One-constraint tasks are held out by request only, so every
family is seen in training.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from posttrain.config_base import StrictModel
from posttrain.errors import PosttrainError
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.suites import scored
from posttrain.tasks.suites.instruct import score as checker
from posttrain.tasks.suites.instruct.families import FAMILIES, conflicting
from posttrain.tasks.suites.instruct.oracle import oracle_reply
from posttrain.tasks.suites.instruct.probes import named_words
from posttrain.tasks.suites.instruct.requests import Request, plain_reply, requests
from posttrain.tasks.task import Task

SUITE = "instruct"
SPLITS = ("train", "heldout")
ECHO_CEILING = 0.5        # echoing the instruction may meet at most this share
MAX_TRIES = 400
LEVEL = {1: "easy", 2: "medium", 3: "hard"}


class Knobs(StrictModel):
    min_constraints: int = Field(1, ge=1, le=3)
    max_constraints: int = Field(3, ge=1, le=3)
    families: str = ",".join(FAMILIES)               # comma-separated: which families to draw

    @field_validator("families")
    @classmethod
    def _known(cls, v: str) -> str:
        return scored.known_families(v, FAMILIES)

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_constraints > self.max_constraints:
            raise ValueError("min_constraints must not exceed max_constraints")
        return self


def combo_split(names: list[str]) -> str:
    """The split a combination of two or more families belongs to (about one in four held out)."""
    digest = hashlib.sha256("+".join(sorted(names)).encode()).digest()
    return "heldout" if digest[0] % 4 == 0 else "train"


def instruction_text(request: Request, constraints: list[dict]) -> str:
    return " ".join([request.text] + [checker.describe(c["id"], c["kwargs"]) for c in constraints])


def acceptable(constraints: list[dict], oracle: str, plain: str, instruction: str) -> bool:
    """The oracle is solved; the empty, "OK." and plain replies are not; the echo and the
    parroted words are not, and meet at most ECHO_CEILING of the constraints."""
    if not checker.score(constraints, oracle).strict:
        return False
    if any(checker.score(constraints, r).strict for r in ("", "OK.", plain)):
        return False
    hacks = [checker.score(constraints, r) for r in (instruction, named_words(constraints))]
    return all(not h.strict and h.partial <= ECHO_CEILING for h in hacks)


def _draw(rng: random.Random, split: str, pool: list[Request], k: Knobs):
    allowed = k.families.split(",")
    n = rng.randint(min(k.min_constraints, len(allowed)), min(k.max_constraints, len(allowed)))
    for _ in range(MAX_TRIES):                  # the size first, so both splits get the same mix
        names = rng.sample(allowed, n)
        if conflicting(names) or (n > 1 and combo_split(names) != split):
            continue
        request = rng.choice(pool)
        oracle, kwargs = oracle_reply(request, names, [FAMILIES[f].draw(rng, request) for f in names])
        constraints = [{"id": FAMILIES[f].checker, "kwargs": kw} for f, kw in zip(names, kwargs)]
        instruction = instruction_text(request, constraints)
        if acceptable(constraints, oracle, plain_reply(request), instruction):
            return request, names, constraints, instruction, oracle
    raise PosttrainError(f"instruct: no acceptable task in {MAX_TRIES} draws of {n} constraints "
                         f"from families {k.families} ({split} split; a combination of two or "
                         "three belongs to one split only: allow more families)")


def make_task(task_id: str, split: str, request: Request, names: list[str], constraints: list[dict],
              instruction: str, oracle: str) -> Task:
    config = TaskConfig.model_validate({
        "task": {"name": f"posttrain/{task_id}", "description": request.text},
        "metadata": {"domain": SUITE, "kind": "single-turn", "family": "+".join(sorted(names)),
                     "families": names, "difficulty": LEVEL[len(names)], "split": split,
                     "request": request.id, "checker": checker.CHECKER, "constraints": constraints},
        "agent": {"timeout_sec": 60.0}, "verifier": {"timeout_sec": 10.0}})
    return Task(task_id, instruction + "\n", config, path=Path(), files={"solution/reply.md": oracle})


def build(n: int, seed: int, split: str, knobs: Knobs) -> list[Task]:
    if split not in SPLITS:
        raise PosttrainError(f"instruct: split must be one of {', '.join(SPLITS)} (got {split!r})")
    pool = requests(split)
    tasks = []
    for i in range(n):
        rng = random.Random(f"instruct/{seed}/{split}/{i}")
        request, names, constraints, instruction, oracle = _draw(rng, split, pool, knobs)
        tasks.append(make_task(f"{split}-{i:04d}-{'-'.join(sorted(names))}", split, request, names,
                               constraints, instruction, oracle))
    return tasks
