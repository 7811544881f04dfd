"""Failure taxonomy of one trial and the denominator policy that turns trials into scores.

Status says what happened; score says what the verifier judged. They are separate: an
agent that ran out of time may still have left /app in a passing state (Harbor runs the
verifier after a timeout too), and then it scores 1 with status agent_timeout.
"""

from __future__ import annotations

STATUSES = ("passed", "failed", "agent_timeout", "verifier_timeout", "verifier_tampered",
            "context_overflow", "infra_error", "model_error")

# Statuses that say nothing about the model: the harness or the task's environment broke.
INFRA = ("infra_error",)

PASS_THRESHOLD = 1.0

# Episode status (posttrain.types.EpisodeStatus) -> eval status; "ok" is decided by reward.
_FROM_EPISODE = {
    "agent_timeout": "agent_timeout",
    "verifier_timeout": "verifier_timeout",
    "context_overflow": "context_overflow",
    "infra_error": "infra_error",
    "verifier_error": "infra_error",  # a missing reward is the task's fault, never a zero
    # A process the agent left wrote the verifier's result: the agent's doing, scored 0.
    "verifier_tampered": "verifier_tampered",
    "model_error": "model_error",
}


def classify(episode_status: str, reward: float | None) -> str:
    """The eval status of a finished trial."""
    if episode_status != "ok":
        if episode_status not in _FROM_EPISODE:
            raise ValueError(f"unknown episode status {episode_status!r}")
        return _FROM_EPISODE[episode_status]
    if reward is None:
        return "infra_error"
    return "passed" if reward >= PASS_THRESHOLD else "failed"


def score(status: str, reward: float | None) -> float:
    """The trial's score: the verifier's reward where it ran, else 0."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    return 0.0 if reward is None else float(reward)


def counted(status: str, policy: str) -> bool:
    """Whether a trial enters the denominator under `policy`.

    all            every trial counts; a broken trial scores 0 (conservative, the default).
    exclude-infra  trials still infra_error after all retries are left out, and the
                   number left out is reported next to every score.
    """
    if policy == "all":
        return True
    if policy == "exclude-infra":
        return status not in INFRA
    raise ValueError(f"unknown denominator policy {policy!r}")


def is_retryable(status: str) -> bool:
    return status in INFRA
