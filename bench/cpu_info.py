"""The CPU a benchmark ran on: lscpu's model name and flags (results differ across CPUs)."""

from __future__ import annotations

import subprocess


def cpu_info() -> dict:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {"model": "unknown", "flags": ""}
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {"model": fields.get("Model name", "unknown").strip(), "flags": fields.get("Flags", "").strip()}
