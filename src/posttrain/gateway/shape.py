"""The fields of an OpenAI request that the gateway itself reads, type-checked before it reads them.

Anything else passes through untouched for the backend to judge. Types are strict (no "5" for 5):
the body is forwarded as received, so what the gateway counts must be what the backend sees.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ContentPart(_Open):
    text: StrictStr | None = None


class Message(_Open):
    content: StrictStr | list[ContentPart] | None = None


class RequestShape(_Open):
    model: StrictStr | None = None
    messages: list[Message] | None = None
    prompt: StrictStr | list[StrictStr] | list[StrictInt] | list[list[StrictInt]] | None = None
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None
    n: StrictInt | None = None
    seed: StrictInt | None = None
    stream: StrictBool | None = None
    tools: list | None = None


class BadShape(ValueError):
    def __init__(self, message: str, param: str | None):
        super().__init__(message)
        self.param = param


def check_shape(body: dict) -> None:
    """Raise BadShape naming the first field of a wrong type."""
    try:
        RequestShape.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not _union_tag(p))
        raise BadShape(f"invalid `{where}`: {first['msg']}", str(first["loc"][0]) if first["loc"] else None) from None


def _union_tag(part) -> bool:
    """pydantic names the union member that failed inside an error's location ('str', 'list[int]')."""
    return part in ("str", "int", "bool") or str(part).startswith("list[")
