"""The seam between `posttrain rl` and the scheduler: a run's domains, their tasks and the
scheduler over them.

Without `[[domains]]` the `[tasks]` section is the one domain, as before (and without a
curriculum the plain TaskSampler runs, so such a run is unchanged). Each `[[domains]]` table
names a task directory or a built-in suite (a name in posttrain.tasks.suites.SUITES, built with the
same knobs as `posttrain tasks generate`), a share of every batch, quotas and a validation
manifest whose broken, flaky or hackable tasks are left out (`include` takes them back).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from posttrain.errors import ConfigError, PosttrainError, TaskError
from posttrain.rollout.envs import capped
from posttrain.schedule.config import DomainConfig
from posttrain.schedule.curriculum import CurriculumKnobs
from posttrain.schedule.sampler import TaskSampler
from posttrain.schedule.scheduler import DomainTasks, Scheduler
from posttrain.schedule.shares import normalise
from posttrain.tasks import suites
from posttrain.tasks.suites import terminal_basics
from posttrain.tasks.task import read_task
from posttrain.validate.manifest import load_manifest_tasks

log = logging.getLogger(__name__)


Warn = Callable[[str], None]


def read_task_dir(root: Path, what: str = "tasks.path", warn: Warn = log.warning) -> list:
    """Every readable task under root; unreadable ones are counted and the first reason shown."""
    if not root.is_dir():
        raise ConfigError(f"{what} {root} is not a directory of Harbor task directories")
    tasks, bad = [], []
    for p in sorted(x for x in root.iterdir() if x.is_dir()):
        try:
            tasks.append(read_task(p))
        except TaskError as e:
            bad.append(str(e))
    if bad:
        warn(f"skipped {len(bad)} of {len(bad) + len(tasks)} task directories in {root}; first: {bad[0]}")
    if not tasks:
        raise PosttrainError(f"no valid tasks in {root}" + (f": {bad[0]}" if bad else ""))
    return tasks


def dir_splits(t, warn: Warn) -> tuple[list, list]:
    """`tasks.kind = "dir"`: tasks.eval_path held out when given, else the last tasks.n_eval
    directories in name order (refused if that leaves no training task)."""
    if not t.path:
        raise ConfigError('tasks.kind = "dir" needs tasks.path, a directory of Harbor task dirs')
    tasks = read_task_dir(Path(t.path), "tasks.path", warn)
    if t.eval_path:
        return tasks, read_task_dir(Path(t.eval_path), "tasks.eval_path", warn)
    if len(tasks) <= t.n_eval:
        raise ConfigError(f"{t.path} has {len(tasks)} tasks: too few to hold out tasks.n_eval = "
                          f"{t.n_eval} and train on the rest; set tasks.eval_path to a held-out "
                          "directory, or a smaller tasks.n_eval (0 skips the held-out evals)")
    return tasks[:len(tasks) - t.n_eval], tasks[len(tasks) - t.n_eval:]


def _legacy_tasks(cfg, run_dir: Path, warn: Warn):
    t = cfg.tasks
    if t.kind == "terminal-basics":
        train = terminal_basics.generate(run_dir / "tasks" / "train", t.n_train, cfg.seed, "train")
        held = terminal_basics.generate(run_dir / "tasks" / "heldout", t.n_eval, cfg.seed + 1, "heldout")
        return train, held
    return dir_splits(t, warn)


def _knob_pairs(options: dict) -> list[str]:
    """A domain's options as the suite's --knob KEY=VALUE pairs (lists joined by commas)."""
    return [f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
            for k, v in options.items()]


def domain_train_tasks(d: DomainConfig, run_dir: Path, seed: int) -> list:
    """A domain's training tasks, each with the domain's episode time cap. A suite is built
    through the suite registry (the same knobs as `posttrain tasks generate --knob`)."""
    if Path(d.source).is_dir():
        tasks = read_task_dir(Path(d.source))
    elif d.source in suites.SUITES:
        try:
            tasks = suites.generate(d.source, run_dir / "tasks" / d.name, d.n_train, seed,
                                    split=d.name, knobs=_knob_pairs(d.options))
        except PosttrainError as e:
            raise ConfigError(f"domain {d.name!r}: {e}") from None
    else:
        raise ConfigError(f"domain {d.name!r}: source {d.source!r} is neither a directory "
                          f"nor a built-in suite ({', '.join(sorted(suites.SUITES))})")
    return [capped(t, d.episode_timeout_s) for t in tasks]


def sandbox_tasks(cfg, run_dir: Path, warn: Warn = log.warning):
    """(train tasks, held-out tasks) of the run: all domains' training tasks in domain order."""
    if not cfg.domains:
        return _legacy_tasks(cfg, run_dir, warn)
    train = [t for d in cfg.domains for t in domain_train_tasks(d, run_dir, cfg.seed)]
    seen: dict[str, int] = {}
    for t in train:
        seen[t.id] = seen.get(t.id, 0) + 1
    if dup := sorted(i for i, n in seen.items() if n > 1):
        raise ConfigError(f"task ids repeat across domains: {dup[:3]}")
    held = (terminal_basics.generate(run_dir / "tasks" / "heldout", cfg.tasks.n_eval, cfg.seed + 1, "heldout")
            if cfg.tasks.n_eval and cfg.tasks.kind == "terminal-basics" else [])
    return train, held


def _usable(d: DomainConfig, ids: list[str]) -> tuple[list[int] | None, dict]:
    """(usable local indices, priors) from the domain's manifest; (None, {}) without one."""
    if d.manifest is None:
        return None, {}
    entries = load_manifest_tasks(d.manifest)
    listed = [i for i, t in enumerate(ids) if t in entries]
    if not listed:
        raise ConfigError(f"domain {d.name!r}: manifest {d.manifest} lists none of its "
                          f"{len(ids)} tasks (a manifest of another task set?)")
    if len(listed) < len(ids):
        log.warning("domain %s: %d tasks not in the manifest are left out (never validated)",
                    d.name, len(ids) - len(listed))
    usable = [i for i in listed if entries[ids[i]]["status"] in d.include]
    if not usable:
        raise ConfigError(f"domain {d.name!r}: no usable task (manifest statuses "
                          f"{sorted({entries[ids[i]]['status'] for i in listed})}, include {d.include})")
    priors = {i: (entries[ids[i]]["successes"], entries[ids[i]]["n"]) for i in usable
              if entries[ids[i]]["n"]}
    return usable, priors


def make_scheduler(cfg, task_ids: list[str]):
    """The run's scheduler over the env's task ids (domain order, as sandbox_tasks built them)."""
    s, g = cfg.schedule, cfg.rollout.group_size
    knobs = CurriculumKnobs(group_size=g, decay=s.decay, floor=s.floor, prior_strength=s.prior_strength,
                            quarantine_after=s.quarantine_after) if s.curriculum else None
    if not cfg.domains:
        if knobs is None:
            return TaskSampler(task_ids, cfg.seed)
        return Scheduler([DomainTasks("default", task_ids)], cfg.seed, knobs)
    try:
        shares = normalise({d.name: d.share for d in cfg.domains})
    except ValueError as e:
        raise ConfigError(f"domains: {e}") from None
    sizes = [len(read_task_dir(Path(d.source))) if Path(d.source).is_dir() else d.n_train
             for d in cfg.domains]
    if sum(sizes) != len(task_ids):
        raise PosttrainError(f"domains hold {sum(sizes)} tasks but the env has {len(task_ids)}")
    out, start = [], 0
    for d, size in zip(cfg.domains, sizes):
        ids, start = task_ids[start:start + size], start + size
        if d.sandbox_slots is not None and d.sandbox_slots < g:
            raise ConfigError(f"domain {d.name!r}: sandbox_slots {d.sandbox_slots} < group_size {g}: "
                              "a group could never run")
        usable, priors = _usable(d, ids)
        out.append(DomainTasks(d.name, ids, shares[d.name], d.priority, usable, priors,
                               d.sandbox_slots // g if d.sandbox_slots else None, d.tokens_per_s))
    return Scheduler(out, cfg.seed, knobs)
