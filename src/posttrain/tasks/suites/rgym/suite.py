"""The `reasoning-gym` suite: any reasoning-gym dataset as single-turn tasks, scored by the
dataset's own `score_answer` (score.py).

    posttrain tasks generate OUT --suite reasoning-gym --knob dataset=chain_sum --knob max_terms=4

`dataset` names the dataset; every other knob is a field of its config dataclass (its
difficulty settings), checked against the field's type and the config's own `validate`.

Each task's instruction is the entry's question and one line asking for the answer between
`<answer>` tags; solution/reply.md is the entry's answer in those tags. An entry is kept only
if that reply scores 1.0 and the empty reply below 1.0, both through the scoring child, so the
stored entry (JSON) is known to score as the dataset meant.

Held out by seed range: an entry's generator seed is the dataset seed plus its index, and the
dataset seed is SPLITS[split] + seed * SEED_STRIDE, so any train seed and any heldout seed draw
from disjoint seed ranges.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from importlib.metadata import version
from pathlib import Path

import reasoning_gym
from pydantic import TypeAdapter, ValidationError
from reasoning_gym.factory import DATASETS

from posttrain.errors import PosttrainError
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.suites.rgym.score import score_reply
from posttrain.tasks.task import Task

SUITE = "reasoning-gym"
SPLITS = {"train": 0, "heldout": 1 << 40}
SEED_STRIDE = 1 << 24          # entries a (split, seed) may use
MAX_SEED = 1 << 16             # so a train seed range never reaches heldout's
TRIES = 4                      # entries drawn per task, at most, before giving up
ANSWER_LINE = "Give your final answer between <answer> and </answer> tags."
LIST_NAMES = "python -c 'import reasoning_gym; print(*sorted(reasoning_gym.factory.DATASETS))'"
SET_BY_SUITE = ("seed", "size")


def dataset_knobs(knobs: dict[str, str]) -> tuple[str, dict]:
    """(dataset name, its config values) from the KEY=VALUE knobs; one-line errors."""
    knobs = dict(knobs)
    name = knobs.pop("dataset", "")
    if not name:
        given = f" (knobs given: {', '.join(knobs)})" if knobs else ""
        raise PosttrainError(f"reasoning-gym: name the dataset with --knob dataset=NAME{given}; "
                             f"the names: {LIST_NAMES}")
    if name not in DATASETS:
        near = difflib.get_close_matches(name, DATASETS, n=3)
        hint = f"did you mean {', '.join(near)}? " if near else ""
        raise PosttrainError(f"reasoning-gym: no dataset {name!r}; {hint}the {len(DATASETS)} "
                             f"names: {LIST_NAMES}")
    fields = config_fields(DATASETS[name][1])
    unknown = [k for k in knobs if k not in fields]
    if unknown:
        raise PosttrainError(f"reasoning-gym: {', '.join(unknown)} is not a knob of {name}; "
                             f"its knobs: {', '.join(fields) or 'none'}")
    return name, {k: knob_value(k, fields[k], v) for k, v in knobs.items()}


def config_fields(config_cls) -> dict[str, object]:
    """A config dataclass's settable fields and their types (seed and size are the suite's)."""
    try:
        hints = typing.get_type_hints(config_cls)
    except (NameError, TypeError):   # an annotation that does not resolve: its field takes anything
        hints = {}
    return {f.name: hints.get(f.name, typing.Any) for f in dataclasses.fields(config_cls)
            if f.name not in SET_BY_SUITE}


def knob_value(key: str, kind, raw: str):
    """A knob's string as its field's type: as written (`3`, `0.5`, `true`), else as JSON
    (`[1, 5]`, `["+", "-"]`, `null`); stored in JSON form."""
    adapter = TypeAdapter(kind)
    try:
        return adapter.dump_python(adapter.validate_python(raw), mode="json")
    except ValidationError:
        pass
    try:
        return adapter.dump_python(adapter.validate_python(json.loads(raw)), mode="json")
    except (ValueError, ValidationError):
        raise PosttrainError(f"reasoning-gym: knob {key}={raw!r} is not a {kind} "
                             "(lists and tuples as JSON, e.g. [1, 5])") from None


def open_dataset(name: str, config: dict):
    """The dataset object; its config's own check failing is a one-line error."""
    try:
        return reasoning_gym.create_dataset(name, **config)
    except (AssertionError, ValueError, TypeError) as e:
        raise PosttrainError(f"reasoning-gym: {name} refuses its knobs: {e or type(e).__name__}") from None


def plain_entry(name: str, index: int, entry: dict) -> dict:
    """The entry as JSON gives it back (what a task stores and the scorer receives)."""
    try:
        return json.loads(json.dumps(entry))
    except (TypeError, ValueError) as e:
        raise PosttrainError(f"reasoning-gym: {name} entry {index} is not JSON ({e}); this "
                             "dataset cannot be stored in task.toml") from None


def make_task(task_id: str, split: str, name: str, config: dict, index: int, entry: dict) -> Task:
    """config: the dataset's knobs with its seed and size; difficulty: the knobs as set."""
    question = str(entry["question"]).rstrip()
    knobs = ",".join(f"{k}={v}" for k, v in sorted(config.items()) if k not in SET_BY_SUITE)
    meta = {"domain": f"{SUITE}/{name}", "kind": "single-turn", "family": name, "split": split,
            "difficulty": knobs or "default", "dataset": name, "index": index,
            "checker": f"reasoning-gym=={version('reasoning-gym')}",
            "config": json.dumps(config, sort_keys=True), "entry": json.dumps(entry, sort_keys=True)}
    toml = TaskConfig.model_validate({
        "task": {"name": f"posttrain/{task_id}", "description": question.splitlines()[0][:200]},
        "metadata": meta, "agent": {"timeout_sec": 60.0}, "verifier": {"timeout_sec": 10.0}})
    reply = f"<answer>{entry['answer']}</answer>\n"
    return Task(task_id, f"{question}\n\n{ANSWER_LINE}\n", toml, path=Path(),
                files={"solution/reply.md": reply})


def scores_as_meant(task: Task) -> bool:
    """The oracle reply scores 1.0 and the empty reply less, as stored."""
    meta = task.config.metadata
    oracle = task.files["solution/reply.md"]
    return score_reply(meta, oracle)[0] == 1.0 and score_reply(meta, "")[0] < 1.0


def build(n: int, seed: int, split: str, knobs: dict[str, str]) -> list[Task]:
    if split not in SPLITS:
        raise PosttrainError(f"reasoning-gym: split must be one of {', '.join(SPLITS)} (got {split!r})")
    if not 0 <= seed < MAX_SEED or n * TRIES > SEED_STRIDE:
        raise PosttrainError(f"reasoning-gym: seed must be in [0, {MAX_SEED}) and n at most "
                             f"{SEED_STRIDE // TRIES} (so splits and seeds stay disjoint)")
    name, values = dataset_knobs(knobs)
    config = {**values, "seed": SPLITS[split] + seed * SEED_STRIDE, "size": n * TRIES}
    ds = open_dataset(name, config)
    tasks: list[Task] = []
    for index in range(n * TRIES):
        if len(tasks) == n:
            return tasks
        entry = plain_entry(name, index, ds[index])
        if entry.get("answer") is None:
            raise PosttrainError(f"reasoning-gym: {name} gives no answer to its entries (its scorer "
                                 "checks a reply against the puzzle), so its tasks would have no oracle")
        task = make_task(f"{split}-{len(tasks):04d}-{name}", split, name, config, index, entry)
        if scores_as_meant(task):
            tasks.append(task)
    if len(tasks) < n:
        raise PosttrainError(f"reasoning-gym: {name}: only {len(tasks)} of its first {n * TRIES} "
                             "entries score 1.0 with their own answer (and below 1.0 with an empty "
                             f"reply) once stored as JSON; {n} were asked for")
    return tasks
