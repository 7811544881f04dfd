"""The CPU model and flags from `lscpu`, recorded in every benchmark JSON."""

from __future__ import annotations

import os
import subprocess


def cpu() -> dict:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {"model_name": fields.get("Model name", "").strip(), "flags": fields.get("Flags", "").split(),
            "cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0]}
