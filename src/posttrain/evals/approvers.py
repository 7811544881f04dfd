"""The reviewer of `posttrain eval --approve` (this terminal) or `--approve-http [HOST:]PORT` (a
UI over HTTP), and the rules whose commands wait for it (agent/approval.py's defaults if none)."""

from __future__ import annotations

import os

from posttrain.agent.approval import DEFAULT_RULES, bad_rule
from posttrain.errors import ConfigError


def parse_address(spec: str) -> tuple[str, int]:
    """`PORT` (on 127.0.0.1) or `HOST:PORT` -> (host, port)."""
    host, _, port = spec.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"--approve-http wants [HOST:]PORT, got {spec!r}") from None
    if not 0 <= number < 65536:
        raise ConfigError(f"--approve-http: port {number} is out of range")
    return host.strip("[]") or "127.0.0.1", number


def open_approver(terminal: bool, http: str | None, rules: list[str], timeout_s: float,
                  token_env: str):
    """(approver or None, the rules it reviews). The HTTP one is started; the caller closes it."""
    if terminal and http:
        raise ConfigError("pick one reviewer: --approve (this terminal) or --approve-http")
    if not (terminal or http):
        if rules:
            raise ConfigError("--approve-rule needs --approve or --approve-http")
        return None, []
    rules = list(rules or DEFAULT_RULES)
    if problem := bad_rule(rules):
        raise ConfigError(f"--approve-rule: {problem}")
    if terminal:
        from posttrain.agent.approval_terminal import TerminalApprover

        return TerminalApprover.from_tty(), rules
    from posttrain.agent.approval_http import HttpApprover, is_loopback

    host, port = parse_address(http)
    token = os.environ.get(token_env) or None
    if token is None and not is_loopback(host):
        raise ConfigError(f"--approve-http {http}: refusing to serve approvals on {host} without a token: "
                          f"set the environment variable {token_env} (--approve-token-env names another), "
                          "or bind 127.0.0.1")
    return HttpApprover(host, port, token, timeout_s).start(), rules
