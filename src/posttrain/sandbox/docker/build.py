"""Build a task's environment/ into an image, once per build-context content.

The image tag is the hash of the context's files (paths, modes, bytes), of the build
settings below and of the id each FROM image has in the engine, so an unchanged task
never rebuilds and a changed one, or one whose base tag now names another image, always
does. Each build's log is kept beside the image cache (`build_log(hash)`).

Settings for air-gapped and proxied machines (environment variables, read here only):
- POSTTRAIN_DOCKER_BASE_MAP="image=local-image,...": `FROM image` builds from the
  local image instead (a key without a tag matches every tag of that name).
- POSTTRAIN_DOCKER_PASS_PROXY=1: pass the host's proxy variables and CA bundle into
  builds (the bundle is copied into the context and named by PIP_CERT, SSL_CERT_FILE,
  REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE build args), so `RUN pip install` works behind a
  TLS-intercepting proxy. Off by default: it changes what the build can reach.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.docker import cli as engine

PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "ftp_proxy")
CA_NAME = ".posttrain-host-ca.crt"
CA_IN_IMAGE = "/etc/ssl/certs/posttrain-host-ca.crt"
CA_VARS = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
FROM_RE = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.I | re.M)


@dataclass
class Built:
    image: str
    cached: bool
    seconds: float
    log: Path


def cache_dir() -> Path:
    base = os.environ.get("POSTTRAIN_DOCKER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "posttrain", "docker")
    path = Path(base)
    (path / "logs").mkdir(parents=True, exist_ok=True)
    return path


def build_log(digest: str) -> Path:
    return cache_dir() / "logs" / f"{digest[:16]}.log"


def base_map() -> dict[str, str]:
    text = os.environ.get("POSTTRAIN_DOCKER_BASE_MAP", "")
    pairs = [p.split("=", 1) for p in re.split(r"[,\s]+", text) if p]
    if any(len(p) != 2 or not all(p) for p in pairs):
        raise SandboxError(f"POSTTRAIN_DOCKER_BASE_MAP={text!r}: expected image=local-image,...")
    return dict(pairs)


def pass_proxy() -> bool:
    return os.environ.get("POSTTRAIN_DOCKER_PASS_PROXY", "") not in ("", "0", "false", "no")


def host_ca_bundle() -> Path:
    for cand in (os.environ.get("SSL_CERT_FILE"), os.environ.get("REQUESTS_CA_BUNDLE"),
                 "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    raise SandboxError("POSTTRAIN_DOCKER_PASS_PROXY=1 but no host CA bundle was found "
                       "(set SSL_CERT_FILE to it)")


def map_base(image: str, mapping: dict[str, str]) -> str:
    return mapping.get(image) or mapping.get(image.split("@")[0].rsplit(":", 1)[0]
                                             if ":" in image.rsplit("/", 1)[-1] else image, image)


def rewrite(dockerfile: str, mapping: dict[str, str], with_ca: bool) -> tuple[str, list[str]]:
    """The Dockerfile with bases mapped (and the CA bundle added after each FROM), plus
    the base images it needs from the engine (not stage names, not ${ARG} references)."""
    stages: set[str] = set()
    bases: list[str] = []

    def one(m: re.Match) -> str:
        image, alias = m.group(1), m.group(2)
        line = m.group(0)
        if image.lower() not in stages and "$" not in image:
            mapped = map_base(image, mapping)
            bases.append(mapped)
            line = line.replace(image, mapped, 1)
        if alias:
            stages.add(alias.lower())
        if with_ca:
            line += f"\nCOPY {CA_NAME} {CA_IN_IMAGE}\n" + "".join(
                f"ARG {v}={CA_IN_IMAGE}\n" for v in CA_VARS)
        return line

    return FROM_RE.sub(one, dockerfile), bases


def context_hash(env_dir: Path, settings: str) -> str:
    h = hashlib.sha256(settings.encode())
    for p in sorted(env_dir.rglob("*")):
        rel = p.relative_to(env_dir).as_posix()
        h.update(f"\0{rel}\0{p.lstat().st_mode:o}\0".encode())
        if p.is_symlink():
            h.update(os.readlink(p).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def ensure_base(cli: str, image: str) -> None:
    """The base image is local, or pulled now; else a clear error with the two remedies."""
    if engine.image_exists(cli, image):
        return
    pulled = engine.run(cli, "pull", "-q", image, check=False, timeout=300)
    if pulled.returncode != 0:
        why = engine.last_line(pulled.stderr.decode(errors="replace"))
        raise SandboxError(
            f"base image {image} is not present and could not be pulled ({why}); provide it "
            f"locally under that name (docker load / docker import / docker build -t {image}), "
            f"or map it to a local image with POSTTRAIN_DOCKER_BASE_MAP='{image}=LOCAL_IMAGE'")


def base_ids(cli: str, bases: list[str]) -> list[str]:
    """The engine's id of each base image (pulled first where missing): a tag moved to
    another image changes the id, and so the build's cache key."""
    out = []
    for base in dict.fromkeys(bases):
        ensure_base(cli, base)
        out.append(engine.run(cli, "image", "inspect", "--format", "{{.Id}}", base,
                              timeout=30).stdout.decode().strip())
    return out


def build(cli: str, env_dir: Path, timeout_s: float, dockerfile_name: str = "Dockerfile") -> Built:
    """The image for env_dir: from the cache when its content and its bases were built before."""
    env_dir = Path(env_dir)
    dockerfile = env_dir / dockerfile_name
    if not dockerfile.is_file():
        raise SandboxError(f"{env_dir}: no {dockerfile_name} to build")
    mapping, with_ca = base_map(), pass_proxy()
    text, bases = rewrite(dockerfile.read_text(encoding="utf-8"), mapping, with_ca)
    start = time.monotonic()
    ids = base_ids(cli, bases)
    digest = context_hash(env_dir, f"{text}\0{with_ca}\0{' '.join(ids)}")
    image, log = f"posttrain-env:{digest[:16]}", build_log(digest)
    if engine.image_exists(cli, image):
        return Built(image, True, time.monotonic() - start, log)
    with tempfile.TemporaryDirectory(prefix="posttrain-build-") as tmp:
        ctx = Path(tmp) / "context"
        shutil.copytree(env_dir, ctx, symlinks=True)
        (ctx / dockerfile_name).write_text(text)
        args = ["build", "--force-rm", "-t", image, "--label", f"{engine.IMAGE_LABEL}={digest}",
                "-f", str(ctx / dockerfile_name)]
        if with_ca:
            shutil.copyfile(host_ca_bundle(), ctx / CA_NAME)
            if (ctx / ".dockerignore").is_file():
                with open(ctx / ".dockerignore", "a") as f:
                    f.write(f"\n!{CA_NAME}\n")
            args += [a for v in PROXY_VARS for name in (v, v.upper()) if os.environ.get(name)
                     for a in ("--build-arg", f"{name}={os.environ[name]}")]
        _run_build(cli, [*args, str(ctx)], log, timeout_s, env_dir)
    return Built(image, False, time.monotonic() - start, log)


def _run_build(cli: str, args: list[str], log: Path, timeout_s: float, env_dir: Path) -> None:
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}   # the legacy builder: plain-text log
    with open(log, "wb") as out:
        proc = subprocess.Popen([cli, *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            _remove_build_leftovers(cli)
            raise SandboxError(f"docker build of {env_dir} exceeded its build timeout "
                               f"({timeout_s:g} s, build_timeout_sec in task.toml); "
                               f"build log: {log}") from None
    if code != 0:
        err = SandboxError(f"docker build of {env_dir} failed: {build_failure(log)}; "
                           f"build log: {log}")
        err.log_tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise err


def build_failure(log: Path) -> str:
    """The failing step and its last output line (not the builder's banner)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    lines = [ln for ln in lines if "DEPRECATED" not in ln and "BuildKit" not in ln
             and "buildx" not in ln and not ln.startswith("---> ")]
    step = next((ln for ln in reversed(lines) if ln.startswith("Step ")), "")
    tail = lines[-1] if lines else "(no output)"
    out = [ln for ln in lines[lines.index(step) + 1:] if not ln.startswith(("--->", "Removing"))] \
        if step else []
    detail = next((ln for ln in reversed(out[:-1]) if ln), "") if len(out) > 1 else ""
    return " | ".join(x for x in (step, detail, tail) if x)


def _remove_build_leftovers(cli: str) -> None:
    """Intermediate containers of a killed legacy build (they have no labels: by status)."""
    done = engine.run(cli, "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Command}} "
                      "{{.Labels}}", check=False, timeout=30)
    for line in done.stdout.decode().splitlines():
        cid, _, rest = line.partition(" ")
        if engine.LABEL not in rest and "/bin/sh -c" in rest:
            engine.run(cli, "rm", "-f", cid, check=False, timeout=60)
