"""The conditions an eval job runs under, recorded once and refused if changed within the job.

Everything that can change a score is here (model, protocol, sampling, turn and time
limits, tools, each domain's context policy, the approval rules, seed, retry and denominator
policy, the task set's
content digest, and for a local checkpoint a digest of its weights, config and tokenizer: the
same path with new weights is another job).
Concurrency (`--jobs`) and the API key are deliberately not: they must not change results.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from posttrain.errors import ConfigError
from posttrain.tasks import Task

DENOMINATOR_POLICIES = ("all", "exclude-infra")
TOOLS = ("bash", "submit")


@dataclass(frozen=True)
class EvalConditions:
    model: str                      # checkpoint directory or the endpoint's model name
    protocol: str                   # "text" (local checkpoint) | "tools" (OpenAI-compatible)
    k: int
    base_url: str | None = None
    temperature: float = 0.7
    top_p: float = 1.0
    max_turns: int = 20
    max_reply_tokens: int = 512
    command_timeout_s: float = 30.0
    observation_budget: int = 4000        # characters of command output shown per call
    agent_timeout_s: float | None = None     # None: each task's own [agent] timeout_sec
    verifier_timeout_s: float | None = None  # None: each task's own [verifier] timeout_sec
    tools: tuple[str, ...] = TOOLS
    seed: int = 0
    max_infra_retries: int = 2
    denominator: str = "all"
    tasks_digest: str = ""
    model_digest: str = ""          # local checkpoints: sha256 of the checkpoint's files
    task_ids: tuple[str, ...] = field(default_factory=tuple)
    task_groups: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)  # id, domain, level
    context: tuple[tuple[str, str], ...] = ()  # (domain or "*", policy spec): evals/contexts.py
    approval: tuple[str, ...] = ()  # --approve: the rules whose commands wait for a reviewer

    def __post_init__(self):
        if self.protocol not in ("text", "tools"):
            raise ConfigError(f"protocol must be 'text' or 'tools', got {self.protocol!r}")
        if self.k < 1:
            raise ConfigError(f"-k must be >= 1, got {self.k}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("temperature must be >= 0 and top_p in (0, 1]")
        if self.max_turns < 1 or self.max_reply_tokens < 1:
            raise ConfigError("max turns and max reply tokens must be >= 1")
        if self.denominator not in DENOMINATOR_POLICIES:
            raise ConfigError(f"denominator must be one of {DENOMINATOR_POLICIES}")
        if self.max_infra_retries < 0:
            raise ConfigError("max infra retries must be >= 0")
        if self.protocol == "tools" and any(spec != "keep_all" for _, spec in self.context):
            raise ConfigError("--context policies apply to the text protocol; the tools agent keeps all")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tools"], d["task_ids"] = list(self.tools), list(self.task_ids)
        d["task_groups"] = [list(g) for g in self.task_groups]
        d["context"] = [list(c) for c in self.context]
        d["approval"] = list(self.approval)
        for name in ("context", "approval"):   # unset: as before, so old job names still match
            if not d[name]:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "EvalConditions":
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["tools"] = tuple(d.get("tools", TOOLS))
        d["task_ids"] = tuple(d.get("task_ids", ()))
        d["task_groups"] = tuple(tuple(g) for g in d.get("task_groups", ()))
        d["context"] = tuple(tuple(c) for c in d.get("context", ()))
        d["approval"] = tuple(d.get("approval", ()))
        return cls(**d)


# Protocol-specific defaults for limits the user did not set. The text protocol's match
# posttrain.agent.config.AgentConfig (sized for the tiny embedded model's context).
PROTOCOL_DEFAULTS = {
    "text": {"max_turns": 6, "max_reply_tokens": 40, "observation_budget": 400,
             "command_timeout_s": 10.0},
    "tools": {"max_turns": 20, "max_reply_tokens": 512, "observation_budget": 4000,
              "command_timeout_s": 30.0},
}


def tasks_digest(tasks: list[Task]) -> str:
    """sha256 over every file of every task (path and bytes), so an edited task is noticed."""
    h = hashlib.sha256()
    for task in sorted(tasks, key=lambda t: t.id):
        for p in sorted(q for q in Path(task.path).rglob("*") if q.is_file()):
            h.update(f"{task.id}/{p.relative_to(task.path)}\0".encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def model_digest(checkpoint: Path) -> str:
    """sha256 over the checkpoint directory's files (names and bytes: weights, config, tokenizer,
    chat template), so retrained weights at the same path are never mistaken for the old ones."""
    h = hashlib.sha256()
    for p in sorted(q for q in Path(checkpoint).iterdir() if q.is_file()):
        h.update(f"{p.name}\0".encode())
        with p.open("rb") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()[:16]


def diff_conditions(old: EvalConditions, new: EvalConditions) -> list[str]:
    """Names and values of the conditions that differ, one line each."""
    a, b = old.to_dict(), new.to_dict()
    keys = list(a) + [k for k in b if k not in a]
    return [f"{k}: {json.dumps(a.get(k))[:60]} -> {json.dumps(b.get(k))[:60]}" for k in keys
            if a.get(k) != b.get(k)]


def check_same(old: EvalConditions, new: EvalConditions, job: str) -> None:
    """Refuse to continue a job under different conditions."""
    changed = diff_conditions(old, new)
    if changed:
        raise ConfigError(f"job {job!r} was started under different conditions "
                          f"({'; '.join(changed)}); use a new --job name to change them")


def default_job_name(c: EvalConditions) -> str:
    """A stable name, so rerunning the same command resumes the same job."""
    stem = Path(c.model.rstrip("/")).name or "model"
    h = hashlib.sha256(json.dumps(c.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
    return f"{stem}-k{c.k}-{h}"
