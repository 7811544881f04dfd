"""The gateway tests' processes: the bench's helpers (bench/parts/gateway_procs.py), imported from there."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from parts.gateway_procs import Proc, backend, free_port, gateway, running, served_by, toml_config  # noqa: E402

__all__ = ["Proc", "backend", "free_port", "gateway", "running", "served_by", "toml_config"]
