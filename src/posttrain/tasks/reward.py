"""Parse the verifier's reward from /logs/verifier (Harbor contract).

reward.json (a flat object with a numeric `reward`; other numeric keys kept as
metrics) is read first, as Harbor's code does; else reward.txt (one float).
A missing, empty, non-numeric, non-finite or out-of-range reward is a VerifierError
naming the value, never a zero.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from posttrain.errors import VerifierError


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise VerifierError(f"{where}: reward is not a finite number ({value!r})")
    return float(value)


def _from_json(path: Path) -> tuple[float, dict[str, float]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise VerifierError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise VerifierError(f"{path}: must be a JSON object")
    details = {k: float(v) for k, v in data.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "reward"}
    if "reward" not in data:
        return None
    return _number(data["reward"], str(path)), details


def _from_txt(path: Path) -> float:
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    if not text:
        raise VerifierError(f"{path}: empty reward file")
    try:
        value = float(text)
    except ValueError:
        raise VerifierError(f"{path}: reward is not a number ({text[:40]!r})") from None
    return _number(value, str(path))


def parse_reward(verifier_dir: str | Path, reward_range: tuple[float, float] = (0.0, 1.0)
                 ) -> tuple[float, dict[str, float]]:
    """(reward, other numeric metrics) from a /logs/verifier directory; the reward must lie
    in the task's declared range ([verifier] reward_range)."""
    reward, details = _parse(Path(verifier_dir))
    lo, hi = reward_range
    if not lo <= reward <= hi:
        raise VerifierError(f"{verifier_dir}: reward {reward!r} is outside the task's "
                            f"reward range [{lo:g}, {hi:g}]")
    return reward, details


def _parse(d: Path) -> tuple[float, dict[str, float]]:
    json_path, txt_path = d / "reward.json", d / "reward.txt"
    details: dict[str, float] = {}
    if json_path.is_file():
        parsed = _from_json(json_path)
        if parsed is not None:
            return parsed
        details = {k: v for k, v in json.loads(json_path.read_text()).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if txt_path.is_file():
        return _from_txt(txt_path), details
    raise VerifierError(f"{d}: no reward.txt or reward.json (with a 'reward' key) was written")
