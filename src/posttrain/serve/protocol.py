"""OpenAI-compatible request bodies: what each field means here, and 400s for what we cannot do.

Unknown fields are refused (as OpenAI does), and so are OpenAI fields this server cannot honour
(penalties, logit_bias, best_of, suffix, forced tool choice, JSON response formats) unless
they are left at their defaults. Extensions beyond the OpenAI API (as vLLM names them):
`top_k`, `stop_token_ids`, `ignore_eos`, `skip_special_tokens`, `return_token_ids` (each
choice carries `token_ids`), and token-id prompts.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrain.config_base import StrictModel
from posttrain.engine.base import SamplingParams

Prompt = Union[str, list[int], list[str], list[list[int]]]
MAX_TOP_LOGPROBS = 20


class StreamOptions(StrictModel):
    include_usage: bool = False


class SamplingFields(StrictModel):
    model: str | None = None
    max_tokens: int | None = Field(None, ge=0)
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    n: int = Field(1, ge=1, le=256)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] = Field(default_factory=list)
    seed: int | None = None
    seed_rows: list[int] | None = None  # extension: choice i samples on stream seed_rows[i] of the seed
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool = True
    ignore_eos: bool = False
    skip_special_tokens: bool | None = None  # None: hide special tokens except the agent's actions
    user: str | None = None  # OpenAI's end-user id: accepted, not used
    # OpenAI fields this server cannot honour; 400 unless left at these defaults
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, body):
        """OpenAI and vLLM read `null` for an optional field as its default."""
        return {k: v for k, v in body.items() if v is not None} if isinstance(body, dict) else body

    @model_validator(mode="after")
    def _refuse_unsupported(self):
        for name in ("presence_penalty", "frequency_penalty"):   # the error names the one sent
            if getattr(self, name):
                raise ValueError(f"{name} is not supported")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported")
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    @property
    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def token_limit(self) -> int | None:
        return self.max_tokens

    def sampling_params(self, eos_id: int | None, max_tokens: int, top_logprobs: int = 0) -> SamplingParams:
        stop_ids = list(self.stop_token_ids)
        if eos_id is not None and not self.ignore_eos:
            stop_ids.append(eos_id)
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, max_tokens=max_tokens,
            stop_token_ids=stop_ids, seed=self.seed, seed_rows=self.seed_rows, top_k=self.top_k, stop=self.stops,
            top_logprobs=top_logprobs,
        )


class CompletionRequest(SamplingFields):
    prompt: Prompt
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None

    @model_validator(mode="after")
    def _completion_rules(self):
        if self.best_of not in (None, 1, self.n):
            raise ValueError("best_of other than n is not supported")
        if self.suffix:
            raise ValueError("suffix is not supported")
        if self.echo and self.stream:
            raise ValueError("echo is not supported with stream")
        if self.max_tokens == 0 and not self.echo:
            raise ValueError("max_tokens must be >= 1 (0 only with echo)")
        return self

    def token_limit(self) -> int:
        return 16 if self.max_tokens is None else self.max_tokens  # OpenAI's completions default


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict] | None = ""


class ChatRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    parallel_tool_calls: bool = True
    response_format: dict | None = None

    @model_validator(mode="after")
    def _chat_rules(self):
        if self.max_tokens == 0:
            raise ValueError("max_tokens must be >= 1")
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs to be true")
        if self.tool_choice not in (None, "auto", "none"):
            raise ValueError("tool_choice must be 'auto' or 'none' (forcing a tool is not supported)")
        if self.response_format not in (None, {"type": "text"}):
            raise ValueError("response_format other than text is not supported")
        return self

    @property
    def active_tools(self) -> list[dict] | None:
        return None if self.tool_choice == "none" else self.tools

    def token_limit(self) -> int | None:
        """max_completion_tokens (the newer name) wins; None: the rest of the context."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens
