"""Hack probes of the generated domain suites, chosen by the task's metadata.domain.

Each module named here exposes PROBES: {probe name: function(task) -> bash script}.
They run beside the generic probes in the `hacks` check and, like them, must not
raise the reward above the no-op agent's. One line per domain.
"""

from __future__ import annotations

import importlib

from posttrain.tasks import Task

DOMAINS = {  # metadata.domain -> module with PROBES
    "finance": "posttrain.validate.domains.finance",
    "longctx": "posttrain.validate.domains.longctx",
    "cad": "posttrain.validate.domains.cad",
    "terminal-tools": "posttrain.validate.domains.terminal_tools",
}


def probes_for(task: Task) -> dict:
    """The domain's probes for this task (none for a domain without a row)."""
    module = DOMAINS.get(task.domain)
    return dict(importlib.import_module(module).PROBES) if module else {}
