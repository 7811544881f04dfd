"""What every bench entry point shares: the --quick and --json flags, and one JSON writer that
records the machine the numbers came from (posttrain.machine.cpu_info: the CPU model lscpu shows,
the flags that change speed and rounding, the cores)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posttrain.machine import cpu_info


def add_args(parser: argparse.ArgumentParser, quick_help: str = "smaller workloads") -> None:
    """--quick (a smaller run) and --json PATH (where write_json puts the results)."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write the results here (with the CPU they were measured on)")


def cpu(**extra) -> dict:
    """This machine's CPU as every result records it, with `extra` fields (e.g. load averages), and
    the kernel's transparent huge page mode (the decode GEMVs ask for huge pages: kernels/gemv.py)."""
    return cpu_info() | {"transparent_hugepage": thp_mode()} | extra


def thp_mode() -> str | None:
    """The bracketed choice of /sys/kernel/mm/transparent_hugepage/enabled (always, madvise, never)."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else text.strip()


def write_json(path: Path | None, payload: dict) -> None:
    """Write payload to path as JSON (nothing without a path), making its folder. A payload without
    a "cpu" entry gets one, first; one that has it (taken at the start or with extra fields) keeps
    it. Long runs call it after every section, so a run that is cut short keeps what it measured."""
    if path is None:
        return
    out = payload if "cpu" in payload else {"cpu": cpu(), **payload}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}", flush=True)
