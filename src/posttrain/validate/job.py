"""A whole `posttrain validate` run: check every task, calibrate difficulty with a policy
if one is given, and write the manifest and validation.html. Rerunning the same command
resumes: saved checks (and calibrations) are reused while the task is unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from posttrain.agent.config import AgentConfig
from posttrain.engine.base import Engine, SamplingParams
from posttrain.validate.config import ValidateConfig
from posttrain.validate.difficulty import calibrate
from posttrain.validate.html import write_html
from posttrain.validate.manifest import manifest_dict, write_manifest
from posttrain.validate.record import TaskReport
from posttrain.validate.runner import OnCheck, task_dirs, validate_dirs
from posttrain.validate.state import CheckStore, fingerprint


@dataclass
class Policy:
    """The policy difficulty is calibrated against: any engine behind `generate`."""

    name: str
    engine: Engine
    framer: object
    k: int = 8
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=1.0))
    agent: AgentConfig = field(default_factory=AgentConfig)

    def key(self) -> str:
        p = self.params
        return f"{self.name}|k={self.k}|T={p.temperature}|top_p={p.top_p}|seed={p.seed}"


def state_dir_for(out: Path) -> Path:
    return Path(out).with_name(Path(out).stem + ".checks")


def report_path(out: Path) -> Path:
    """The HTML report of manifest `out`: validation.json -> validation.html, a.json -> a.html,
    so two manifests in one directory keep their own reports."""
    return Path(out).with_suffix(".html")


def _add_difficulty(reports: list[TaskReport], policy: Policy, store: CheckStore,
                    threshold: float) -> None:
    from posttrain.tasks import read_task

    todo, entries = [], {}
    for r in reports:
        if r.status == "broken":
            continue
        fp = fingerprint(Path(r.path))
        entries[r.id] = (fp, store.load(r.id, fp))
        cached = entries[r.id][1]["difficulty"].get(policy.key())
        if cached:
            r.difficulty = cached
        elif not (task := read_task(r.path)).single_turn:   # calibration plays agent episodes
            todo.append(task)
    if not todo:
        return
    results = calibrate(todo, policy.engine, policy.framer, policy.k, policy.params,
                        policy.agent, policy.name, threshold)
    for r in reports:
        if r.id in results:
            r.difficulty = results[r.id]
            fp, entry = entries[r.id]
            entry["difficulty"][policy.key()] = results[r.id]
            store.save(r.id, fp, entry)


def run_validation(root: Path, cfg: ValidateConfig, out: Path, jobs: int = 1,
                   policy: Policy | None = None, on_start: Callable[[int], None] | None = None,
                   on_task: Callable[[TaskReport], None] | None = None,
                   on_check: OnCheck | None = None) -> dict:
    """Validate every task under root; write `out` (JSON) and its report_path beside it."""
    paths = task_dirs(root)
    if on_start:
        on_start(len(paths))
    state = state_dir_for(out)
    reports = []
    for report in validate_dirs(paths, cfg, state, jobs, on_check):
        reports.append(report)
        if on_task:
            on_task(report)
    if policy is not None:
        _add_difficulty(reports, policy, CheckStore(state, cfg.digest()), cfg.pass_threshold)
    manifest = manifest_dict(reports, cfg.model_dump(),
                             {"name": policy.name, "key": policy.key()} if policy else None)
    write_manifest(out, manifest)
    write_html(manifest, report_path(out))
    return manifest
