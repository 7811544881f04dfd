"""Apply a task's environment/Dockerfile to a sandbox without Docker, when it is simple enough.

Supported: FROM a Debian/Ubuntu image (ignored: the sandbox runs on the host's own
system dirs), WORKDIR, COPY and ADD of local paths (ADD unpacks local tar archives as
Docker does), ENV, LABEL. Anything else (RUN, USER, ARG, ...) needs a real image
build, so it raises SandboxError naming the instruction and the docker backend.
"""

from __future__ import annotations

import glob
import json
import posixpath
import shlex
import shutil
import tarfile
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.base import Sandbox

PLAIN_BASES = ("debian", "ubuntu", "buildpack-deps")
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")  # Harbor's names (docker backend)


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs; comments dropped, `\\` continuations joined."""
    steps: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        steps.append((word.upper(), rest.strip()))
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        steps.append((word.upper(), rest.strip()))
    return steps


def prepare_environment(env_dir: Path, sandbox: Sandbox) -> None:
    """Copy files and set ENV/WORKDIR from env_dir/Dockerfile; no Dockerfile, nothing to do.
    A docker-compose.yaml (a multi-container task) needs a backend that builds images."""
    dockerfile = Path(env_dir) / "Dockerfile"
    compose = any((Path(env_dir) / name).is_file() for name in COMPOSE_FILES)
    build = getattr(sandbox, "build_environment", None)
    if build is not None and (compose or dockerfile.is_file()):
        build(Path(env_dir))        # a backend that builds images (docker) takes it whole
        return
    if compose:
        raise SandboxError(f"{env_dir}: a multi-container task (docker-compose.yaml) needs the "
                           "docker backend")
    if not dockerfile.is_file():
        return
    for word, args in parse_dockerfile(dockerfile.read_text()):
        if word == "FROM":
            _check_base(args)
        elif word == "WORKDIR":
            sandbox.spec.workdir = _resolve(sandbox.spec.workdir, args.strip())
            workdir = _host(sandbox, sandbox.spec.workdir, word)
            workdir.mkdir(parents=True, exist_ok=True)
            sandbox.give(sandbox.host_path("/" + sandbox.spec.workdir.split("/")[1]))
        elif word in ("COPY", "ADD"):
            _copy(Path(env_dir), sandbox, word, args)
        elif word == "ENV":
            sandbox.spec.env.update(_env_pairs(args))
        elif word != "LABEL":
            raise SandboxError(f"{dockerfile}: {word} is not supported without an image build "
                               "(only FROM, WORKDIR, COPY, ADD, ENV); use the docker backend")


def _check_base(args: str) -> None:
    image = [a for a in args.split() if not a.startswith("--")][0]
    name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    if name not in PLAIN_BASES:
        raise SandboxError(f"FROM {image}: only plain Debian/Ubuntu bases run without Docker "
                           "(the sandbox uses the host's system dirs); use the docker backend")


def _host(sandbox: Sandbox, path: str, word: str) -> Path:
    try:
        return sandbox.host_path(path)
    except SandboxError as e:
        raise SandboxError(f"{word} {path}: only /app, /tmp and /logs are writable without an "
                           f"image build ({e}); use the docker backend") from None


def _resolve(workdir: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(workdir, path))


def _env_pairs(args: str) -> dict[str, str]:
    words = shlex.split(args)
    if words and "=" not in words[0]:          # legacy form: ENV KEY value with spaces
        return {words[0]: args.split(None, 1)[1] if len(words) > 1 else ""}
    return dict(w.split("=", 1) for w in words)


def _copy(context: Path, sandbox: Sandbox, word: str, args: str) -> None:
    words = json.loads(args) if args.startswith("[") else shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    if any(not f.startswith(("--chown", "--chmod")) for f in flags):
        raise SandboxError(f"{word} {args}: flags {flags} need the docker backend")
    words = [w for w in words if not w.startswith("--")]
    if len(words) < 2:
        raise SandboxError(f"{word} {args}: needs a source and a destination")
    *sources, dest = words
    sandbox_dest = _resolve(sandbox.spec.workdir, dest)
    target = _host(sandbox, sandbox_dest, word)
    into_dir = dest.endswith("/") or len(sources) > 1 or target.is_dir()
    for src in sources:
        if "://" in src:
            raise SandboxError(f"{word} {src}: remote sources need the docker backend")
        matches = sorted(glob.glob(str(context / src))) or [str(context / src)]
        for match in matches:
            path = Path(match)
            if not path.exists() or context.resolve() not in [path.resolve(), *path.resolve().parents]:
                raise SandboxError(f"{word} {src}: not found in the build context {context} "
                                   "(sources must be inside environment/, as for docker build)")
            _place(path, target, into_dir, unpack=word == "ADD")
    sandbox.give(sandbox.host_path("/" + sandbox_dest.split("/")[1]))


def _place(src: Path, target: Path, into_dir: bool, unpack: bool) -> None:
    if src.is_dir():
        shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
    elif unpack and tarfile.is_tarfile(src):
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(src) as tar:
            tar.extractall(target, filter="data")
    else:
        dest = target / src.name if into_dir else target
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
