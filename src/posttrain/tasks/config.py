"""task.toml schema (Harbor), with Harbor's defaults, validated when read."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr,
                      field_validator)

Number = StrictFloat | StrictInt


class _HarborSection(BaseModel):
    # Harbor adds keys over time; unknown keys are kept, known ones are type-checked.
    model_config = ConfigDict(extra="allow")


class TaskInfo(_HarborSection):
    name: StrictStr = ""
    description: StrictStr = ""
    authors: list[StrictStr] = Field(default_factory=list)
    keywords: list[StrictStr] = Field(default_factory=list)


class AgentSection(_HarborSection):
    timeout_sec: Number = 600.0
    user: StrictStr | None = None
    network_mode: Literal["public", "no-network", "allowlist"] | None = None


class VerifierSection(_HarborSection):
    timeout_sec: Number = 600.0
    env: dict[str, StrictStr] = Field(default_factory=dict)
    user: StrictStr | None = None
    # A posttrain extension: the rewards the verifier may write; any other value is an error.
    reward_range: tuple[Number, Number] = (0.0, 1.0)

    @field_validator("reward_range")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"reward_range must be two finite numbers, low < high (got {list(v)})")
        return float(lo), float(hi)


class SolutionSection(_HarborSection):
    env: dict[str, StrictStr] = Field(default_factory=dict)


class EnvironmentSection(_HarborSection):
    build_timeout_sec: Number = 600.0
    docker_image: StrictStr | None = None
    cpus: Number = 1
    memory_mb: StrictInt = 2048
    storage_mb: StrictInt = 10240
    gpus: StrictInt = 0
    network_mode: Literal["public", "no-network", "allowlist"] = "no-network"
    allowed_hosts: list[StrictStr] = Field(default_factory=list)
    allow_internet: bool | None = None  # deprecated Harbor key, mapped onto network_mode
    env: dict[str, StrictStr] = Field(default_factory=dict)
    workdir: StrictStr = "/app"


class TaskConfig(_HarborSection):
    version: StrictStr = "1.0"
    task: TaskInfo = Field(default_factory=TaskInfo)
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)

    @property
    def network_mode(self) -> str:
        env = self.environment
        if env.allow_internet is not None and "network_mode" not in env.model_fields_set:
            return "public" if env.allow_internet else "no-network"
        return env.network_mode
