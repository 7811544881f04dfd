"""Readable episode transcripts: exactly the tokens the model saw and wrote."""

from __future__ import annotations

from pathlib import Path

from posttrain.types import Episode


def render_episode(ep: Episode, tokenizer) -> str:
    text = tokenizer.decode(ep.tokens, skip_special_tokens=False)
    text = text.replace("<|end|>", "<|end|>\n")
    head = (f"=== task {ep.task_id}  group {ep.group_id}  reward {ep.reward:g}  "
            f"status {ep.status}  turns {len(ep.turns)}  tokens out {ep.tokens_out}")
    return head + (f"\nerror: {ep.error}" if ep.error else "") + "\n" + text + "\n"


def write_samples(path: Path, episodes: list[Episode], tokenizer, n: int) -> None:
    """Write the first n episodes, preferring one success and one failure when present."""
    if n <= 0 or not episodes:
        return
    wins = [e for e in episodes if e.reward >= 1]
    losses = [e for e in episodes if e.reward < 1]
    picked: list[Episode] = []
    for e in wins[:1] + losses[:1] + episodes:
        if len(picked) >= n:
            break
        if all(e is not p for p in picked):
            picked.append(e)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(render_episode(e, tokenizer) for e in picked), encoding="utf-8")
