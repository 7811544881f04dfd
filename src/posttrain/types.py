"""The small, serialisable objects that cross layers (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

KilledBy = Literal["none", "timeout", "memory", "pids", "output"]
EpisodeStatus = Literal[
    "ok", "agent_timeout", "verifier_timeout", "verifier_error", "verifier_tampered",
    "infra_error", "context_overflow", "model_error"    # model_error: an agent program failed
]


@dataclass(frozen=True)
class Reward:
    """What every reward function returns: the reward and named details beside it (e.g. the
    instruct suite's `strict` and `met:FAMILY`), recorded on the episode, never trained on."""

    value: float
    details: dict[str, float] = field(default_factory=dict)


@dataclass
class ExecResult:
    """What one command in a sandbox did. Output is capped; `truncated` says if it was."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False
    killed_by: KilledBy = "none"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Completion:
    """One sampled continuation: ids, logprobs of the processed distribution, why it stopped.

    routing (MoE models, the embedded engine): the experts each MoE layer chose for every token the
    engine ran, the prompt's and the reply's but its last, [position][moe layer][k]; None for a
    dense model or an engine that does not return it."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]
    policy_version: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    routing: list[list[list[int]]] | None = None


PARSE_FAILURES = ("malformed", "unterminated", "no_tool_call", "bad_json", "unknown_tool",
                  "bad_arguments")   # the text protocol's two, then the tool-calling harness's


@dataclass
class Turn:
    """One agent action and what the sandbox answered."""

    action: str
    kind: str     # bash | tool | submit | denied (by a reviewer) | a parse failure (PARSE_FAILURES)
    observation: str
    exec_result: ExecResult | None = None
    failures: list[str] = field(default_factory=list)   # this reply's calls that did not parse


@dataclass
class Segment:
    """A closed part of an episode's stream: what the engine saw and sampled until a context
    policy rewrote the prompt (agent/context.py). Fields as in Episode."""

    tokens: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    versions: list[int]
    prompt_len: int


@dataclass
class Step:
    """One timed step of an episode: a model call, a tool call, a reviewer's verdict, the
    verifier, or a checkpoint's snapshot or restore (for traces)."""

    kind: Literal["model", "tool", "approval", "verifier", "snapshot", "restore"]
    turn: int
    start_s: float                  # time.time() at its start
    duration_s: float
    attributes: dict = field(default_factory=dict)   # tokens_in/out, exit_code, reward, ...


@dataclass
class Episode:
    """A whole attempt at a task, token-in/token-out.

    `tokens` is the stream since the last context rewrite (all of it under keep_all); earlier
    streams are in `segments`. `loss_mask[i]` is 1 where the model sampled tokens[i];
    `logprobs[i]` and `versions[i]` are the sampler's, meaningful where the mask is 1.
    `routing[i]` (MoE) is the engine's experts [moe layer][k] for tokens[i], for a prefix of
    tokens: the latest completion's, which covers all it was given.
    """

    task_id: str
    group_id: int
    tokens: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    reward_details: dict[str, float] = field(default_factory=dict)
    status: EpisodeStatus = "ok"
    error: str = ""
    prompt_len: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    domain: str = ""        # the scheduler's domain of its task (per-domain metrics, advantages)
    routing: list[list[list[int]]] | None = None
    segments: list[Segment] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    retries: int = 0        # engine and sandbox calls retried (agent/retry.py)

    def parse_failures(self) -> dict[str, int]:
        """Replies and tool calls that did not parse, by kind (PARSE_FAILURES)."""
        counts: dict[str, int] = {}
        for t in self.turns:
            for kind in t.failures or ([t.kind] if t.kind in PARSE_FAILURES else []):
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def streams(self) -> list[Segment]:
        """Every stream the engine saw, oldest first: the closed segments, then the current one."""
        return [*self.segments, Segment(self.tokens, self.loss_mask, self.logprobs, self.versions,
                                        self.prompt_len)]

    def sampled_versions(self) -> list[int]:
        """The policy version of every sampled token, over all streams."""
        return [v for s in self.streams() for v, m in zip(s.versions, s.loss_mask) if m]

    @property
    def tokens_out(self) -> int:
        return sum(sum(s.loss_mask) for s in self.streams())

    @property
    def tokens_in(self) -> int:
        return sum(len(s.tokens) for s in self.streams()) - self.tokens_out

    def restart(self, prompt: list[int]) -> None:
        """Close the current stream as a segment and start a new one from `prompt` (mask 0)."""
        self.segments.append(self.streams()[-1])
        self.tokens, self.loss_mask, self.logprobs, self.versions = [], [], [], []
        self.append(prompt, sampled=False)
        self.prompt_len = len(prompt)

    def append(self, ids: list[int], *, sampled: bool, logprobs=None, version: int = 0) -> None:
        """Append prompt/observation ids (sampled=False) or model ids with their logprobs."""
        self.tokens.extend(ids)
        self.loss_mask.extend([1 if sampled else 0] * len(ids))
        self.logprobs.extend(logprobs if sampled else [0.0] * len(ids))
        self.versions.extend([version] * len(ids))

    def append_completion(self, comp: Completion) -> None:
        """Append an engine's reply (ids, logprobs, version); its routing (MoE) covers the whole
        stream the engine was given, so it replaces the episode's."""
        self.append(comp.token_ids, sampled=True, logprobs=comp.logprobs, version=comp.policy_version)
        self.routing = comp.routing

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tokens_in"], d["tokens_out"] = self.tokens_in, self.tokens_out
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Episode:
        d = {k: v for k, v in d.items() if k not in ("tokens_in", "tokens_out")}
        turns = [Turn(t["action"], t["kind"], t["observation"],
                      ExecResult(**t["exec_result"]) if t.get("exec_result") else None,
                      t.get("failures", [])) for t in d.pop("turns")]
        segments = [Segment(**s) for s in d.pop("segments", [])]
        steps = [Step(**s) for s in d.pop("steps", [])]
        return cls(**d, turns=turns, segments=segments, steps=steps)
