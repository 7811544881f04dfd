"""The gateway's TOML config: variants, routes, canary, keys; validated when loaded."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator

from posttrain.config_base import StrictModel
from posttrain.otel import OtelConfig

LOOPBACK_NAMES = ("localhost",)


class Price(BaseModel):
    """USD per million tokens."""

    input_per_mtok: float = Field(0.0, ge=0)
    output_per_mtok: float = Field(0.0, ge=0)

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


class Variant(StrictModel):
    """One model variant served by one or more interchangeable backends."""

    backends: list[str] = Field(min_length=1)  # base URLs ending in /v1
    model: str | None = None            # the upstream model id (default: the variant's name)
    weights_version: str = ""
    lossless: bool = False              # e.g. speculative decoding: must be greedy-identical
    fallback: list[str] = []            # variants to try when every backend of this one fails
    price: Price = Price()
    api_key_env: str | None = None      # env var holding the upstream's key, if it needs one

    @field_validator("backends")
    @classmethod
    def _backends_have_scheme(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"backend {url!r} needs a scheme: write http://{url}")
        return urls


class Route(StrictModel):
    """First matching route wins; an unset field matches anything."""

    variant: str
    latency_class: str | None = None    # X-Latency-Class header
    task_type: str | None = None        # X-Task-Type header
    min_prompt_chars: int = 0
    max_prompt_chars: int | None = None


class Canary(StrictModel):
    candidate: str
    baseline: str
    share: float = Field(0.1, ge=0, le=1)
    margin: float = Field(0.05, gt=0, le=1)  # non-inferiority margin on mean reward
    min_tasks: int = Field(20, ge=1)          # fewer shared tasks: insufficient evidence, never promote


class Otel(OtelConfig):
    """OpenTelemetry: one span per call, exported over OTLP/HTTP (needs the `otel` extra)."""

    service_name: str = "posttrain-gateway"


class Key(StrictModel):
    """An API key as stored: id, salt and salted SHA-256 of the secret; never the secret."""

    name: str
    id: str
    salt: str
    hash: str
    variants: list[str] = []            # empty: every variant
    default_variant: str | None = None
    rpm: int | None = Field(None, gt=0)
    tpm: int | None = Field(None, gt=0)
    budget_usd: float | None = Field(None, ge=0)
    admin: bool = False                 # may apply canary decisions


class GatewayConfig(StrictModel):
    host: str = "127.0.0.1"
    port: int = 8080
    audit_db: str = "gateway-audit.sqlite"
    audit_bodies: bool = True           # store request bodies (replay needs them)
    max_body_bytes: int = Field(1 << 20, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    connect_timeout_s: float = Field(2.0, gt=0)
    cooldown_s: float = Field(10.0, gt=0)
    health_interval_s: float = Field(1.0, gt=0)
    max_connections: int = Field(512, gt=0)
    default_max_tokens: int = Field(1024, gt=0)  # set on requests that name none
    default_variant: str
    auto_model: str = "auto"            # `model` value that means "route by policy"
    variants: dict[str, Variant] = Field(min_length=1)
    routes: list[Route] = []
    canary: Canary | None = None
    keys: list[Key] = []
    otel: Otel | None = None

    @model_validator(mode="after")
    def _check_names(self):
        known = set(self.variants)
        named = [self.default_variant] + [r.variant for r in self.routes]
        named += [f for v in self.variants.values() for f in v.fallback]
        for k in self.keys:
            named += k.variants + ([k.default_variant] if k.default_variant else [])
        if self.canary:
            named += [self.canary.candidate, self.canary.baseline]
        unknown = sorted(set(named) - known)
        if unknown:
            raise ValueError(f"unknown variant(s) named in the config: {', '.join(unknown)}")
        if self.auto_model in known:
            raise ValueError(f"auto_model {self.auto_model!r} clashes with a variant name")
        if len({k.id for k in self.keys}) != len(self.keys):
            raise ValueError("two keys share an id")
        return self

    def exposed(self) -> bool:
        return not is_loopback(self.host)

    def check_exposure(self) -> None:
        """A gateway reachable from other machines must check keys."""
        if self.exposed() and not self.keys:
            raise ValueError(f"refusing to listen on {self.host} without API keys: "
                             "add [[keys]] or bind 127.0.0.1")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_config(path: str | Path) -> GatewayConfig:
    with open(path, "rb") as f:
        return GatewayConfig.model_validate(tomllib.load(f))
