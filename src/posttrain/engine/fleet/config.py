"""EnginesConfig: which rollout engine `posttrain rl` samples from (`kind`: the embedded one, the
same in a child process, or vLLM servers it starts or attaches to; recipes/rl/engines.py builds
it) and the conformance gate's knobs (rollout/conformance.py holds its default limits and applies
them); checked when built."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from posttrain.config_base import StrictModel

if TYPE_CHECKING:
    from posttrain.engine.paged.dtypes import DtypeChoice


EMBEDDED_CHECK_EVERY = 20


class EnginesConfig(StrictModel):
    kind: Literal["embedded", "process", "vllm"] = "embedded"
    # process: the child on a core of its own, the trainer (and the sandboxes its threads
    # start) on the others. None: only for single-turn tasks, which start no sandboxes.
    pin_cores: bool | None = None
    # vllm:
    urls: list[str] = []                     # attach to these running servers instead of starting
    replicas: int = Field(1, ge=1)           # servers to start (one process group each)
    python: str = ".venv-vllm/bin/python"    # vLLM's own environment (scripts/vllm_env.sh)
    extra_args: list[str] = []               # appended to the server command
    # --enforce-eager (vLLM without torch.compile): starts about 2 minutes sooner on 2 cores and
    # every replica restart is as quick; false gives vLLM's default compiled model.
    enforce_eager: bool = True
    # The engine's compute dtype, every kind: "auto" is bf16 where the CPU multiplies it natively
    # (engine/paged/dtypes.py), resolved once here so vLLM and the embedded engine agree on it.
    # The trainer's forward is fp32 (or bf16 autocast): a bf16 engine's mismatch is what
    # algo.tis corrects, and the gate's default limits follow the dtype (rollout/conformance.py).
    dtype: Literal["float32", "bfloat16", "auto"] = "float32"
    max_model_len: int = Field(2048, ge=16)
    kv_cache_gib: int = Field(1, ge=1)       # VLLM_CPU_KVCACHE_SPACE per replica
    cores: list[str] = []                    # VLLM_CPU_OMP_THREADS_BIND per replica ("0", "1", ...)
    startup_timeout_s: float = Field(600.0, gt=0)
    max_concurrent: int = Field(32, ge=1)    # requests in flight per replica
    affinity_slack_tokens: int = Field(4096, ge=0)  # overload guard of prefix-affine routing
    # Conformance gate: engine logprobs vs the trainer's forward on fixed probes.
    # weight updates between checks; 0 = only at start; None: every update for vLLM, every
    # 20th for the embedded engines (each check is one probe pass and one trainer forward)
    check_every: int | None = Field(None, ge=0)
    probes: int = Field(4, ge=1)
    probe_tokens: int = Field(16, ge=1)
    max_abs_logp: float | None = Field(None, gt=0)  # refuse to start above this max |Δlogp| (None: conformance.GATE_LIMITS)
    mean_abs_logp: float | None = Field(None, gt=0)  # ... or above this mean |Δlogp|

    @functools.cached_property
    def compute_dtype(self) -> "DtypeChoice":
        """`dtype` resolved on this machine, once per config ("auto": from the GPU or the CPU's
        flags); torch is imported here, not when the config is read."""
        import torch

        from posttrain.engine.paged.dtypes import choose_dtype

        return choose_dtype(self.dtype, "cuda" if torch.cuda.is_available() else "cpu")

    @property
    def check_interval(self) -> int:
        if self.check_every is not None:
            return self.check_every
        return 1 if self.kind == "vllm" else EMBEDDED_CHECK_EVERY

    @model_validator(mode="after")
    def _check(self):
        if self.pin_cores is not None and self.kind != "process":
            raise ValueError(f'engines.pin_cores is a knob of engines.kind = "process", not "{self.kind}"')
        if self.cores and len(self.cores) != self.replicas:
            raise ValueError(f"engines.cores names {len(self.cores)} replicas, engines.replicas is {self.replicas}")
        return self
