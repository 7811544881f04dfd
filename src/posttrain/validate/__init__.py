"""Judge task quality before tasks reach training: static hygiene, oracle, no-op and
trivial agents, hack probes, oracle mutants, determinism and difficulty (docs/validate.md).

Training and evaluation read the manifest through `load_manifest` / `usable_tasks`.
"""

from posttrain.validate.config import ValidateConfig
from posttrain.validate.manifest import load_manifest, usable_tasks
from posttrain.validate.record import STATUSES

__all__ = ["STATUSES", "ValidateConfig", "load_manifest", "usable_tasks"]
