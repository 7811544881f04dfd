"""The agent's text protocol: one action per assistant turn.

The model replies `<bash>COMMAND</bash>` to run a shell command, or `<submit/>`
when it is done; the turn ends with the `<|end|>` token. Anything else is a
malformed action (the agent is told so and the turn counts); a reply cut off by
the token limit is unterminated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from posttrain.types import ExecResult

BASH_RE = re.compile(r"\s*<bash>(.*?)</bash>\s*", re.DOTALL)
SUBMIT = "<submit/>"
MALFORMED_HINT = "error: reply with <bash>COMMAND</bash> or <submit/>"
UNTERMINATED_HINT = "error: reply was cut off; keep commands short"


@dataclass
class Action:
    """One thing a reply asks for. bash: a shell command; tool: a declared tool's call (name,
    args); submit; or a failure (types.PARSE_FAILURES) with the hint the model is answered."""

    kind: Literal["bash", "tool", "submit", "malformed", "unterminated", "no_tool_call",
                  "bad_json", "unknown_tool", "bad_arguments"]
    command: str = ""
    name: str = ""
    args: dict = field(default_factory=dict)
    hint: str = ""


def parse_action(text: str, terminated: bool = True) -> Action:
    """Parse one reply (without its end token). `terminated` is False if it hit the limit."""
    if not terminated:
        return Action("unterminated", hint=UNTERMINATED_HINT)
    if text.strip() == SUBMIT:
        return Action("submit")
    m = BASH_RE.fullmatch(text)
    if m and m.group(1).strip() and "<bash>" not in m.group(1):
        return Action("bash", m.group(1).strip())
    return Action("malformed", hint=MALFORMED_HINT)


def format_observation(result: ExecResult, budget: int = 512, tail: int = 0) -> str:
    """What the agent sees of a command: output (clipped to `budget` chars, the last `tail`
    of them from its end, with a marker where the middle was cut) and exit status."""
    out = result.stdout + result.stderr
    if len(out) > budget and tail:
        cut = len(out) - budget
        out = out[:budget - tail] + f"\n[... {cut} characters cut ...]\n" + out[-tail:]
    elif len(out) > budget:
        out = out[:budget] + f"\n[... {len(out) - budget} more characters]"
    if result.truncated:
        out += "\n[output truncated by the sandbox]"
    if result.timed_out:
        out += "\n[command timed out]"
    elif result.exit_code != 0:
        out += f"\n[exit {result.exit_code}]"
    return out.strip("\n") or "(no output)"


def render_action(action: Action) -> str:
    """The canonical reply text for an action (used for demonstrations)."""
    return SUBMIT if action.kind == "submit" else f"<bash>{action.command}</bash>"
