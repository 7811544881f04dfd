"""Finance probes: a number sprayer and sign, scale, period and tolerance perturbations.

The sprayer lists every number printed in the reports with the asked unit. The
perturbation probes know the exact answer (from tests/expected.json, read on the
host) and write it with the sign flipped, scaled by 1000 either way, for the
previous period, or just outside the tolerance: a comparator that takes |x|,
ignores scale, or is loose fails them.
"""

from __future__ import annotations

import json
import re
import shlex

from posttrain.tasks import Task

UNIT_RE = re.compile(r"the unit `([^`]+)`")


def _expected(task: Task) -> dict:
    return json.loads((task.tests_dir / "expected.json").read_text())


def _write(text: str) -> str:
    return f"printf '%s\\n' {shlex.quote(text)} > /app/answer.txt\n"


def number_sprayer(task: Task) -> str:
    m = UNIT_RE.search(task.instruction)
    unit = m.group(1) if m else ""
    return ("grep -rhoE -- '-?[0-9][0-9,]*(\\.[0-9]+)?' /app/reports 2>/dev/null | sort -u | "
            f"sed 's/$/ {unit}/' > /app/answer.txt\n")


def _perturbed(factor: float = 1.0, shift_tol: float = 0.0, period: bool = False):
    def probe(task: Task) -> str:
        e = _expected(task)
        v = e["period_value"] if period else e["value"] * factor + shift_tol * e["tolerance"]
        return _write(f"{v:.4f} {e['unit']}")
    return probe


def _scale_error(task: Task) -> str:
    """The right figure read in thousands and reported as millions (a unit slip)."""
    e = _expected(task)
    return _write(f"{e['value'] * 1000 if e['unit'] == 'USD millions' else e['value'] / 100:.4f} {e['unit']}")


def _rounded(task: Task) -> str:
    """The exact answer rounded to what the tolerance allows (must still pass)."""
    e = _expected(task)
    return _write(f"{e['value']:.2f} {e['unit']}")


# Scripted partial agents (not probes): what they score shows how the reward grades.
PARTIAL = {"unit_slip": _scale_error, "rounded_right": _rounded}

PROBES = {"number_sprayer": number_sprayer, "sign_flip": _perturbed(-1.0),
          "scale_up": _perturbed(1000.0), "scale_down": _perturbed(0.001),
          "period_shift": _perturbed(period=True), "off_tolerance": _perturbed(1.0, 2.0)}
