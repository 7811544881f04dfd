"""The seam between `posttrain rl` and the scheduler: a run's domains, their tasks and the
scheduler over them.

Without `[[domains]]` the `[tasks]` section is the one domain, named "train" (and without a
curriculum the plain TaskSampler runs, so such a run is unchanged). Each `[[domains]]` table
names a task directory or a built-in suite (a name in posttrain.tasks.suites.SUITES, built with the
same knobs as `posttrain tasks generate`), a share of every batch, quotas and a validation
manifest whose broken, flaky or hackable tasks are left out (`include` takes them back).
Every domain's source is resolved once, in `task_sources`; the held-out split is `held_out`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, NamedTuple

from posttrain.errors import ConfigError, PosttrainError, TaskError
from posttrain.recipes.rl.config import DomainConfig
from posttrain.rollout.envs import capped
from posttrain.schedule.curriculum import CurriculumKnobs
from posttrain.schedule.sampler import TaskSampler
from posttrain.schedule.scheduler import DomainTasks, Scheduler
from posttrain.schedule.shares import normalise
from posttrain.tasks import Task, suites
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


class Source(NamedTuple):
    """A domain and where its tasks come from: a directory of Harbor tasks, or a built-in suite."""

    domain: DomainConfig
    kind: Literal["dir", "suite"]


def task_sources(cfg) -> list[Source]:
    """The run's domains, each source resolved once: the [[domains]] tables (a directory if one
    exists at `source`, else a suite name), or [tasks] as the one implicit domain, whose
    tasks.kind says which ("copy" is single-turn prompts, recipes/rl/env.py)."""
    if not cfg.domains:
        return [_implicit_domain(cfg.tasks)]
    return [Source(d, _resolve(d)) for d in cfg.domains]


def _implicit_domain(t) -> Source:
    """[tasks] as the [[domains]] entry it stands for (its held-out split: `held_out`)."""
    if t.kind == "terminal-basics":
        return Source(DomainConfig(name="train", source=terminal_basics.SUITE, n_train=t.n_train), "suite")
    if not t.path:
        raise ConfigError('tasks.kind = "dir" needs tasks.path, a directory of Harbor task dirs')
    return Source(DomainConfig(name="train", source=t.path, n_train=t.n_train), "dir")


def _resolve(d: DomainConfig) -> Literal["dir", "suite"]:
    if Path(d.source).is_dir():
        return "dir"
    if d.source in suites.SUITES:
        return "suite"
    raise ConfigError(f"domain {d.name!r}: source {d.source!r} is neither a directory "
                      f"nor a built-in suite ({', '.join(sorted(suites.SUITES))})")


def _knob_pairs(options: dict) -> list[str]:
    """A domain's options as the suite's --knob KEY=VALUE pairs (lists joined by commas)."""
    return [f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
            for k, v in options.items()]


def domain_train_tasks(source: Source, run_dir: Path, seed: int, warn: Warn = log.warning) -> list:
    """A domain's tasks, each with the domain's episode time cap. A suite is built through the
    suite registry (the same knobs as `posttrain tasks generate --knob`) into RUN/tasks/<name>."""
    d = source.domain
    if source.kind == "dir":
        return [capped(t, d.episode_timeout_s) for t in read_task_dir(Path(d.source), warn=warn)]
    try:
        tasks = suites.generate(d.source, run_dir / "tasks" / d.name, d.n_train, seed,
                                split=d.name, knobs=_knob_pairs(d.options))
    except PosttrainError as e:
        raise ConfigError(f"domain {d.name!r}: {e}") from None
    return [capped(t, d.episode_timeout_s) for t in tasks]


@dataclass(frozen=True)
class RunTasks:
    """The run's sandbox tasks: each domain's training tasks in domain order, and the held-out ones."""

    per_domain: list[list[Task]]
    held: list[Task]

    @property
    def train(self) -> list[Task]:
        return [t for tasks in self.per_domain for t in tasks]

    @property
    def domain_ids(self) -> list[list[str]]:
        """Each domain's task ids, what make_scheduler takes."""
        return [[t.id for t in tasks] for tasks in self.per_domain]


def sandbox_tasks(cfg, run_dir: Path, warn: Warn = log.warning) -> RunTasks:
    """The run's training tasks, domain by domain, and its held-out tasks."""
    # [tasks] warns through `warn` (the console); [[domains]] tables warn in the log, as before
    per_domain = [domain_train_tasks(s, run_dir, cfg.seed, warn if not cfg.domains else log.warning)
                  for s in task_sources(cfg)]
    seen: dict[str, int] = {}
    for t in (t for tasks in per_domain for t in tasks):
        seen[t.id] = seen.get(t.id, 0) + 1
    if dup := sorted(i for i, n in seen.items() if n > 1):
        raise ConfigError(f"task ids repeat across domains: {dup[:3]}")
    if single := [t.id for tasks in per_domain for t in tasks if t.single_turn]:
        raise ConfigError(f"single-turn tasks (e.g. {single[0]}) have no sandbox verifier: train on "
                          'them as prompts (tasks.kind = "single-turn"), not as sandbox tasks')
    return held_out(cfg, run_dir, per_domain, warn)


def held_out(cfg, run_dir: Path, per_domain: list[list[Task]], warn: Warn) -> RunTasks:
    """The held-out split, from [tasks]: tasks.n_eval generated terminal-basics tasks, or for a
    task directory ([tasks] alone) tasks.eval_path, else its last tasks.n_eval tasks in name
    order (refused if that leaves no training task); none for a directory with [[domains]]."""
    t = cfg.tasks
    if t.kind == "terminal-basics":
        return RunTasks(per_domain, terminal_basics.generate(run_dir / "tasks" / "heldout", t.n_eval,
                                                             cfg.seed + 1, "heldout"))
    if cfg.domains:
        return RunTasks(per_domain, [])
    if t.eval_path:
        return RunTasks(per_domain, read_task_dir(Path(t.eval_path), "tasks.eval_path", warn))
    (tasks,) = per_domain
    if len(tasks) <= t.n_eval:
        raise ConfigError(f"{t.path} has {len(tasks)} tasks: too few to hold out tasks.n_eval = "
                          f"{t.n_eval} and train on the rest; set tasks.eval_path to a held-out "
                          "directory, or a smaller tasks.n_eval (0 skips the held-out evals)")
    cut = len(tasks) - t.n_eval
    return RunTasks([tasks[:cut]], tasks[cut:])


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


def make_scheduler(cfg, domain_ids: list[list[str]]):
    """The run's scheduler over each domain's task ids (RunTasks.domain_ids, in domain order)."""
    s, g = cfg.schedule, cfg.rollout.group_size
    knobs = CurriculumKnobs(group_size=g, decay=s.decay, floor=s.floor, prior_strength=s.prior_strength,
                            quarantine_after=s.quarantine_after) if s.curriculum else None
    if not cfg.domains:  # [tasks]: every task, the plain sampler unless a curriculum runs
        (task_ids,) = domain_ids
        if knobs is None:
            return TaskSampler(task_ids, cfg.seed)
        return Scheduler([DomainTasks("default", task_ids)], cfg.seed, knobs)
    try:
        shares = normalise({d.name: d.share for d in cfg.domains})
    except ValueError as e:
        raise ConfigError(f"domains: {e}") from None
    if len(domain_ids) != len(cfg.domains):
        raise PosttrainError(f"{len(cfg.domains)} domains but task ids for {len(domain_ids)}")
    out = []
    for d, ids in zip(cfg.domains, domain_ids):
        if d.sandbox_slots is not None and d.sandbox_slots < g:
            raise ConfigError(f"domain {d.name!r}: sandbox_slots {d.sandbox_slots} < group_size {g}: "
                              "a group could never run")
        usable, priors = _usable(d, ids)
        out.append(DomainTasks(d.name, ids, shares[d.name], d.priority, usable, priors,
                               d.sandbox_slots // g if d.sandbox_slots else None, d.tokens_per_s))
    return Scheduler(out, cfg.seed, knobs)
