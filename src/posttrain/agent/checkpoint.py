"""Episode checkpoints: after every turn, an episode's state (messages, token ids, logprobs,
segments, steps) and a snapshot of its sandbox's writable areas, written atomically; a run
started again resumes the episode at its last completed turn, in a fresh sandbox with the
snapshot copied back in.

What a snapshot covers: the files under /app, /tmp and /logs, and, in a docker sandbox with a
writable root (a root task), the container's own changes elsewhere (its exported layer,
sandbox/docker/layer.py). What it does not: processes (a server the agent started is gone after
a resume). A
snapshot larger than `max_mb` is not kept: that episode starts again from its first turn.
Layout: ROOT/<task>__<group>__<slot>/{state.json, snapshot/{app,tmp,logs,layer}}; the swap goes through
`.tmp` and `.old` siblings, so a kill at any point leaves one whole checkpoint or none.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

AREAS = ("app", "tmp", "logs")


def _size_mb(path: Path) -> float:
    return sum(p.lstat().st_size for p in path.rglob("*")) / 2**20


@dataclass
class EpisodeStore:
    root: Path
    max_mb: float = 256.0

    def path(self, task_id: str, group_id: int, slot: int) -> Path:
        return Path(self.root) / f"{task_id}__{group_id}__{slot}"

    def save(self, key: tuple[str, int, int], state: dict, sandbox) -> bool:
        """Write the checkpoint; False (and none kept) if its snapshot is over max_mb."""
        final = self.path(*key)
        tmp, old = final.with_name(final.name + ".tmp"), final.with_name(final.name + ".old")
        shutil.rmtree(tmp, ignore_errors=True)
        for area in AREAS:
            shutil.copytree(sandbox.host_path(f"/{area}"), tmp / "snapshot" / area, symlinks=True)
        sandbox.export_layer(tmp / "snapshot" / "layer")
        if _size_mb(tmp) > self.max_mb:
            shutil.rmtree(tmp)
            self.drop(key)
            return False
        (tmp / "state.json").write_text(json.dumps(state))
        if final.exists():
            shutil.rmtree(old, ignore_errors=True)   # final is whole: an .old beside it is stale
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        return True

    def load(self, key: tuple[str, int, int]) -> tuple[dict, Path] | None:
        """(state, snapshot dir) of the last whole checkpoint, or None."""
        final = self.path(*key)
        for d in (final, final.with_name(final.name + ".old")):  # .old: killed mid-swap
            if (d / "state.json").is_file():
                return json.loads((d / "state.json").read_text()), d / "snapshot"
        return None

    def restore(self, snapshot: Path, sandbox) -> None:
        """Replace the sandbox's writable areas with the snapshot's."""
        for area in AREAS:
            target = sandbox.host_path(f"/{area}")
            for child in target.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            shutil.copytree(snapshot / area, target, symlinks=True, dirs_exist_ok=True)
            sandbox.give(target)
        sandbox.import_layer(snapshot / "layer")

    def close(self) -> None:
        """Remove the root if no episode is left in it (every one ended and was dropped)."""
        if Path(self.root).is_dir() and not any(Path(self.root).iterdir()):
            Path(self.root).rmdir()

    def drop(self, key: tuple[str, int, int]) -> None:
        final = self.path(*key)
        for d in (final, final.with_name(final.name + ".tmp"), final.with_name(final.name + ".old")):
            shutil.rmtree(d, ignore_errors=True)
