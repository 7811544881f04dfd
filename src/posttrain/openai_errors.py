"""OpenAI-shaped error responses, one module for `posttrain serve` and the gateway:
{"error": {"message", "type", "param", "code"}}, typed by status as OpenAI's API types them
(a bad or missing key is `authentication_error`). Imports starlette only."""

from __future__ import annotations

import json

from starlette.responses import Response

TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "invalid_request_error",
         404: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    return TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str, code: str | int | None = None, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": error_type(status), "param": param,
                                 "code": None if code is None else str(code)}}).encode()


def error_response(status: int, message: str, code: str | int | None = None, param: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(status, message, code, param), status_code=status,
                    media_type="application/json", headers=headers)
