"""Context policies of an eval job, per domain: `--context [DOMAIN=]SPEC` (SPEC as
agent.config.ContextConfig.parse reads it, e.g. `last_k:k=3`), recorded in the job's
conditions as (domain, canonical spec) pairs; "*" is every domain not named."""

from __future__ import annotations

from pydantic import ValidationError

from posttrain.agent.config import ContextConfig
from posttrain.config_base import first_error
from posttrain.errors import ConfigError
from posttrain.tasks import Task

EVERY = "*"


def parse_contexts(specs: list[str]) -> tuple[tuple[str, str], ...]:
    """The --context flags as sorted (domain, canonical spec) pairs; a bad one is a ConfigError."""
    out = {}
    for spec in specs:
        named = "=" in spec.split(":")[0]             # DOMAIN=kind:..., not kind:knob=...
        domain, policy = spec.split("=", 1) if named else ("", spec)
        try:
            out[domain or EVERY] = ContextConfig.parse(policy).label()
        except ValidationError as e:
            raise ConfigError(f"--context {spec!r}: {first_error(e, 'knob')}") from None
        except ValueError as e:
            raise ConfigError(f"--context {spec!r}: {str(e).splitlines()[0]}") from None
    return tuple(sorted(out.items()))


def check_domains(pairs: tuple[tuple[str, str], ...], tasks: list[Task]) -> None:
    """A --context for a domain that no task has is a typo, not a no-op: refuse it."""
    known = {t.domain for t in tasks}
    unknown = [d for d, _ in pairs if d != EVERY and d not in known]
    if unknown:
        raise ConfigError(f"--context {unknown[0]}=...: no task has domain {unknown[0]!r}; "
                          f"the tasks' domains: {', '.join(sorted(known))}")


def task_contexts(pairs: tuple[tuple[str, str], ...], tasks: list[Task]) -> list[ContextConfig]:
    """Each task's policy: its domain's, else the "*" one, else keep_all."""
    by = {d: ContextConfig.parse(s) for d, s in pairs}
    default = by.get(EVERY, ContextConfig())
    return [by.get(t.domain, default) for t in tasks]
