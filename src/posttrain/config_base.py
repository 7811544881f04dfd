"""The base of posttrain's typed configs: a pydantic model that refuses unknown keys, so a
misspelt key is an error that names it, and the one-line form of a validation error. Imports
pydantic only."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, ValidationError

# loc entries pydantic adds for a union's member (`timeout_sec.float`), not keys of the config
_MEMBER = re.compile(r"^(str|int|float|bool|bytes|none|dict|list|tuple|set)$|\[|^(constrained|lax|strict)-")


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


def error_key(err: dict) -> str:
    """The dotted key a pydantic error is about (`domains.0.share`), union member names left out;
    "" for an error about the whole model (a model validator's)."""
    return ".".join(str(x) for x in err["loc"] if not (isinstance(x, str) and _MEMBER.search(x)))


def first_error(e: ValidationError, what: str = "config key") -> str:
    """The first problem as one line: `config key KEY: why (got X)`, or `why` alone when it is
    about the whole model."""
    err = e.errors()[0]
    key, why = error_key(err), err["msg"].removeprefix("Value error, ")
    got = f" (got {err['input']!r})" if key and "input" in err and not isinstance(err["input"], dict) else ""
    return f"{what} {key}: {why}{got}" if key else why
