"""Real Terminal-Bench 1 tasks for bench/validate_real.py: where they come from, and the two
edits that let them run on a machine whose only network is the package registries.

The tasks are never committed: a cache directory (POSTTRAIN_REAL_TASKS or --tasks) holds
TB1 task directories copied from a public repository, e.g. the registry datasets of
laude-institute/terminal-bench-datasets:

    git clone https://github.com/laude-institute/terminal-bench-datasets /tmp/tbd
    for d in /tmp/tbd/datasets/evoeval/*; do cp -r "$d" "$DIR/evoeval-$(basename $d)"; done
    cp -r /tmp/tbd/datasets/aider_polyglot/polyglot_cpp_* "$DIR"/

Localized (in the imported copy, never in the cache): run-tests.sh boilerplate that
downloads uv from astral.sh (not a package registry) and `uv add pytest` becomes the same
pytest run from Debian's python3-pytest, installed when the image is built; a verify-time
`pip install pytest` is dropped for the same reason. The tests themselves are unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

from posttrain.tasks.tb1.importer import import_task

ENV = "POSTTRAIN_REAL_TASKS"
# The TB base images are served by the local Debian image (REFERENCES §10).
BASES = ("ghcr.io/laude-institute/t-bench/python-3-13", "ghcr.io/laude-institute/t-bench/ubuntu-24-04",
         "buildpack-deps")
PYTEST_LAYER = ("RUN apt-get update && apt-get install -y --no-install-recommends python3-pytest "
                "&& rm -rf /var/lib/apt/lists/*\n")
UV_LINES = re.compile(r"^.*(astral\.sh|uv init|uv add|\.local/bin/env|apt-get (update|install -y curl)"
                      r"|pip3? install[^\n]*pytest).*$", re.M)


def base_map(local: str) -> str:
    return ",".join(f"{b}={local}" for b in BASES)


def sources(cache: Path, only: list[str] | None) -> list[Path]:
    dirs = sorted(p for p in cache.iterdir() if (p / "task.yaml").is_file())
    return [p for p in dirs if not only or p.name in only]


def imported(src: Path, out: Path) -> Path:
    """The Harbor copy of one TB1 task under out (imported and localized once)."""
    dest = out / src.name
    if not (dest / "task.toml").is_file():
        localize(import_task(src, out))
    return dest


def localize(task: Path) -> None:
    run_tests = task / "tests" / "run-tests.sh"
    text = run_tests.read_text(encoding="utf-8") if run_tests.is_file() else ""
    if not UV_LINES.search(text):
        return
    text = UV_LINES.sub("# (localized: pytest comes from the image)", text)
    run_tests.write_text(text.replace("uv run pytest", "pytest"))   # the script, as uv runs it
    dockerfile = task / "environment" / "Dockerfile"
    lines = dockerfile.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.upper().startswith("FROM")) + 1
    dockerfile.write_text("".join(lines[:at] + [PYTEST_LAYER] + lines[at:]))
