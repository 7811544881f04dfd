"""What agents did with their tools, per episode: for RL's step metrics and eval summaries."""

from __future__ import annotations

from collections import Counter

from posttrain.types import Episode


def tool_stats(episodes: list[Episode]) -> dict[str, float]:
    """Per episode: turns, tool calls run, and replies or calls that did not parse, in all and
    by kind (`parse_<kind>_mean`); nothing for a batch without tool turns or parse failures."""
    n = max(1, len(episodes))
    calls = sum(t.kind == "tool" for e in episodes for t in e.turns)
    failed: Counter = Counter()
    for e in episodes:
        failed.update(e.parse_failures())
    if not calls and not failed:
        return {}
    out = {"tool_calls_mean": calls / n, "parse_failures_mean": sum(failed.values()) / n}
    return out | {f"parse_{kind}_mean": count / n for kind, count in sorted(failed.items())}
