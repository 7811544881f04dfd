"""Reproducible installs: every distribution that posttrain (with its test extra) needs is pinned
exactly in constraints.txt, and the installed version is the pinned one."""

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            pins[_norm(name)] = version.strip()
    return pins


def _closure(root: str, extras: set[str]) -> set[str]:
    """Names of the installed distributions root[extras] needs, transitively."""
    seen, todo = set(), [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        if _norm(name) in seen:
            continue
        seen.add(_norm(name))
        for raw in metadata.requires(name) or []:
            req = Requirement(raw)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted | {""}):
                todo.append((req.name, set(req.extras)))
    return seen - {_norm(root)}


def _installed_extras() -> set[str]:
    """test, plus every other extra whose requirements are all installed here."""
    extras = {"test"}
    for raw in metadata.requires("posttrain") or []:
        req = Requirement(raw)
        for extra in metadata.metadata("posttrain").get_all("Provides-Extra") or []:
            if req.marker is not None and req.marker.evaluate({"extra": extra}):
                extras.add(extra)
    missing = set()
    for raw in metadata.requires("posttrain") or []:
        req = Requirement(raw)
        for extra in extras - {"test"}:
            if req.marker is not None and req.marker.evaluate({"extra": extra}):
                try:
                    metadata.version(req.name)
                except metadata.PackageNotFoundError:
                    missing.add(extra)
    return extras - missing


def test_every_dependency_is_pinned_and_installed_at_its_pin():
    pins = _pins()
    needed = _closure("posttrain", _installed_extras())
    missing = sorted(needed - set(pins))
    assert not missing, f"not pinned in constraints.txt (run scripts/upgrade_deps.sh): {missing}"
    for name in needed:
        installed = metadata.version(name).split("+")[0]
        assert installed == pins[name], f"{name} {installed} installed, {pins[name]} pinned"
