"""A reply's reward on a reasoning-gym task: the dataset's own `score_answer` on the text
between the reply's last `<answer>` and `</answer>` tags (reasoning-gym's `extract_answer`),
computed in the scoring child (child.py, worker.py), never in this process.

The reward is the scorer's value in [0, 1] (anything else is 0). Details: `strict`, the reply
exactly right (reward 1.0; the held-out report of `posttrain rl` pairs it); `refused`, the child
refused something the reply made the scorer do; `timeout`, scoring ran past its limit (reward 0).
"""

from __future__ import annotations

import importlib.util
import json
import math

from posttrain.tasks.suites.rgym.child import CHILD

if importlib.util.find_spec("reasoning_gym") is None:   # the one-line install hint (suites._import)
    raise ModuleNotFoundError("No module named 'reasoning_gym'", name="reasoning_gym")


def request(metadata: dict, reply: str) -> dict:
    """What the child needs: the dataset's name and config, the entry, the reply."""
    return {"dataset": metadata["dataset"], "config": json.loads(metadata["config"]),
            "entry": json.loads(metadata["entry"]), "reply": reply}


def score_reply(metadata: dict, reply: str) -> tuple[float, dict[str, float]]:
    """(reward, {"strict", "refused", "timeout"}) for one task's metadata and a reply."""
    answer = CHILD.score(request(metadata, reply))
    value = answer["score"]
    reward = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0
    reward = reward if 0.0 <= reward <= 1.0 else 0.0
    return reward, {"strict": float(reward == 1.0), "refused": float(bool(answer["refused"])),
                    "timeout": float(bool(answer.get("timeout")))}
