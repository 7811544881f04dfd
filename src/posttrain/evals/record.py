"""TrialRecord: what one eval trial produced, in the shape of Harbor's trial result.json.

`n_input_tokens` counts what the model was given on every call, summed over calls (how
APIs bill); `context_tokens` is the length of the final conversation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class TrialOutput:
    """A finished trial before it is written: the record plus its files."""

    record: "TrialRecord"
    trajectory: dict
    verifier_files: dict[str, str] = field(default_factory=dict)  # name -> text


@dataclass
class TrialRecord:
    task_name: str
    attempt: int
    status: str
    reward: float | None
    reward_details: dict[str, float] = field(default_factory=dict)
    error: str = ""
    n_input_tokens: int = 0
    n_output_tokens: int = 0
    context_tokens: int = 0
    n_turns: int = 0
    n_malformed: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # setup_s model_s sandbox_s verifier_s total_s
    infra_retries: int = 0
    cost_usd: float | None = None
    started_at: str = ""
    finished_at: str = ""

    @property
    def trial_name(self) -> str:
        return trial_name(self.task_name, self.attempt)

    def to_json(self) -> dict:
        d = asdict(self)
        d["trial_name"] = self.trial_name
        # Harbor's nesting, so tools that read Harbor jobs find the usual keys
        d["verifier_result"] = ({"rewards": {"reward": self.reward, **self.reward_details}}
                                if self.reward is not None else None)
        d["agent_result"] = {"n_input_tokens": self.n_input_tokens,
                             "n_output_tokens": self.n_output_tokens, "cost_usd": self.cost_usd}
        d["exception_info"] = ({"type": self.status, "message": self.error}
                               if self.error else None)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "TrialRecord":
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})


def trial_name(task_name: str, attempt: int) -> str:
    """Deterministic (Harbor uses a random suffix): the name is the trial's identity on resume."""
    return f"{task_name}__{attempt}"


def trial_dir(job_dir: Path, task_name: str, attempt: int) -> Path:
    return job_dir / trial_name(task_name, attempt)
