"""Pinned wheels from PyPI for the code suite: host packages to mutate and the verifier's pytest.

Nothing third-party is committed: `fetch` runs `pip download --no-deps` for an exact
version into a cache directory and checks the file's sha256 against the pin here, so
the same seed gives the same tasks everywhere. A package that cannot be fetched is a
PosttrainError naming it, raised before any task directory is written.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import PosttrainError


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    sha256: str
    licence: str = ""

    @property
    def filename(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Host:
    """A pure-Python package whose wheel ships its own tests, and what of it to mutate."""

    wheel: Wheel
    package: str                      # import name
    extra_packages: tuple[str, ...]   # other top-level packages of the wheel the tests import
    modules: dict[str, str]           # module file -> the test file that covers it
    homepage: str


TOOLZ = Host(
    Wheel("toolz", "1.0.0", "292c8f1c4e7516bf9086f8850935c799a874039c8bcf959d47b600e4c44a6236",
          "BSD-3-Clause"),
    package="toolz", extra_packages=("tlz",),
    modules={"toolz/itertoolz.py": "toolz/tests/test_itertoolz.py",
             "toolz/dicttoolz.py": "toolz/tests/test_dicttoolz.py",
             "toolz/functoolz.py": "toolz/tests/test_functoolz.py",
             "toolz/recipes.py": "toolz/tests/test_recipes.py"},
    homepage="https://github.com/pytoolz/toolz")
HOSTS = {"toolz": TOOLZ}

# The verifier's own pytest, run from these zips inside the sandbox (never from /app).
PYTEST_WHEELS = (
    Wheel("pytest", "8.3.4", "50e16d954148559c9a74109af1eaf0c945ba2d8f30f0a3d3335edde19788b6f6", "MIT"),
    Wheel("pluggy", "1.5.0", "44e1ad92c8ca002de6377e165f3e0f1be63266ab4d554740532335b9d75ea669", "MIT"),
    Wheel("iniconfig", "2.0.0", "b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374", "MIT"),
    Wheel("packaging", "24.2", "09abb1bccd265c01f4a3aa3f7a7db064b36514d2cba19a2f694fe6150451a759",
          "Apache-2.0 OR BSD-2-Clause"),
)


def default_cache() -> Path:
    base = os.environ.get("POSTTRAIN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "posttrain")
    return Path(base) / "pypi"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(wheel: Wheel, cache: Path | None = None) -> Path:
    """The wheel file in the cache, downloaded first if missing; checked against its pin."""
    cache = Path(cache or default_cache())
    path = cache / wheel.filename
    if path.is_file() and _sha256(path) == wheel.sha256:
        return path
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--no-cache-dir", "-q", "-d", str(cache), wheel.pin]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise PosttrainError(f"could not fetch {wheel.pin} from PyPI: pip timed out") from None
    if r.returncode != 0 or not path.is_file():
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PosttrainError(f"could not fetch {wheel.pin} from PyPI: {tail[0]}")
    got = _sha256(path)
    if got != wheel.sha256:
        path.unlink()
        raise PosttrainError(f"{wheel.pin}: sha256 {got} does not match the pin {wheel.sha256}")
    return path


def unpack(wheel_path: Path, dest: Path) -> Path:
    """Extract a wheel (a zip of the installed tree) into dest; returns dest."""
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel_path) as z:
        for info in z.infolist():
            if info.filename.startswith("/") or ".." in Path(info.filename).parts:
                raise PosttrainError(f"{wheel_path.name}: unsafe member {info.filename}")
        z.extractall(dest)
    return dest
