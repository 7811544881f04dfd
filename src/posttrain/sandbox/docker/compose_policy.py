"""The isolation policy for multi-container tasks: check a task's merged compose config
(as `docker-compose config` prints it) and rewrite it into the project posttrain runs.

Harbor's convention: service `main` is the agent's container, every other service is a
sidecar. posttrain runs `main` itself (`docker run`, the single-container flags), so it
is taken out of the project; what it asks for that posttrain honours (environment,
working_dir, image) is returned beside the project. Every sidecar gets every capability
dropped (a small set may be added back), no-new-privileges, the sandbox's memory, pids
and CPU limits, our labels, and only the project's one network, which is `internal`
(no route out) unless the task asks for a public network. What would reach the host
(privileged, host namespaces, devices, published ports, host paths outside environment/,
external networks or volumes, unconfined security options) is refused with its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from posttrain.errors import SandboxError

MAIN = "main"
SAFE_CAPS = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL",
             "NET_BIND_SERVICE", "SETPCAP", "AUDIT_WRITE", "MKNOD", "SYS_CHROOT"}
REFUSED_KEYS = ("privileged", "pid", "ipc", "userns_mode", "cgroup_parent", "devices",
                "device_cgroup_rules", "ports", "volumes_from", "cgroup", "runtime")
MAIN_REFUSED = ("cap_add", "security_opt", "volumes", "network_mode", "user", "tmpfs",
                "sysctls")
DROPPED = ("container_name", "restart", "networks", "deploy", "scale")


@dataclass
class Limits:
    """What every sidecar may use (the sandbox's own limits, each)."""

    memory_mb: int
    pids: int
    cpus: float | None
    public: bool
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class MainRequest:
    """What the task's compose file asks of `main` that posttrain honours."""

    image: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    working_dir: str | None = None


def _refuse(service: str, what: str) -> SandboxError:
    return SandboxError(f"docker-compose.yaml: service {service!r}: {what} is not allowed in "
                        "a sandboxed task (docs/sandbox-docker.md, Compose)")


def check_service(name: str, svc: dict, env_dir: Path) -> None:
    """Raise for anything in one service that would reach past the sandbox."""
    for key in REFUSED_KEYS:
        if svc.get(key):
            raise _refuse(name, key)
    mode = svc.get("network_mode")
    if mode not in (None, "none"):
        raise _refuse(name, f"network_mode {mode!r}")
    extra = {str(c).upper().removeprefix("CAP_") for c in svc.get("cap_add") or ()} - SAFE_CAPS
    if extra:
        raise _refuse(name, f"cap_add {sorted(extra)}")
    for opt in svc.get("security_opt") or ():
        if "unconfined" in str(opt) or str(opt).startswith(("seccomp", "apparmor", "label")):
            raise _refuse(name, f"security_opt {opt!r}")
    for vol in svc.get("volumes") or ():
        _check_volume(name, vol, env_dir)


def _check_volume(name: str, vol, env_dir: Path) -> None:
    if isinstance(vol, dict):
        kind, source = vol.get("type", "volume"), str(vol.get("source") or "")
    else:
        source = str(vol).split(":", 1)[0] if ":" in str(vol) else ""
        kind = "bind" if source.startswith(("/", ".", "~")) else "volume"
    if kind in ("volume", "tmpfs"):
        return
    if kind != "bind":
        raise _refuse(name, f"a {kind} volume")
    path = Path(source).resolve()
    if path != env_dir and env_dir not in path.parents:
        raise _refuse(name, f"host path {source} (only paths inside environment/)")


def main_request(svc: dict) -> MainRequest:
    """What `main` asks for; isolation-related keys are refused, others ignored."""
    for key in MAIN_REFUSED:
        if svc.get(key):
            raise _refuse(MAIN, key)
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return MainRequest(image=svc.get("image"), working_dir=svc.get("working_dir"),
                       environment={str(k): "" if v is None else str(v) for k, v in env.items()})


def sidecar(svc: dict, limits: Limits) -> dict:
    """One sidecar with the sandbox's isolation applied."""
    out = {k: v for k, v in svc.items() if k not in DROPPED}
    deps = out.get("depends_on")
    if isinstance(deps, dict):
        out["depends_on"] = {k: v for k, v in deps.items() if k != MAIN}
    elif isinstance(deps, list):
        out["depends_on"] = [d for d in deps if d != MAIN]
    if not out.get("depends_on"):
        out.pop("depends_on", None)
    out["cap_drop"] = ["ALL"]
    out["security_opt"] = sorted({*(out.get("security_opt") or ()), "no-new-privileges:true"})
    out["mem_limit"] = out["memswap_limit"] = f"{limits.memory_mb}m"
    out["pids_limit"] = limits.pids
    if limits.cpus:
        out["cpus"] = limits.cpus
    out["labels"] = {**_as_dict(out.get("labels")), **limits.labels}
    return out


def _as_dict(labels) -> dict:
    if isinstance(labels, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in labels)
    return dict(labels or {})


def project(config: dict, env_dir: Path, limits: Limits) -> tuple[dict, MainRequest]:
    """The project posttrain runs (sidecars only, one network) and main's request."""
    services = config.get("services") or {}
    for name, svc in services.items():
        check_service(name, svc or {}, env_dir)
    for kind in ("networks", "volumes"):
        for name, spec in (config.get(kind) or {}).items():
            if (spec or {}).get("external"):
                raise SandboxError(f"docker-compose.yaml: external {kind[:-1]} {name!r} is not "
                                   "allowed in a sandboxed task (docs/sandbox-docker.md, Compose)")
    request = main_request(services.get(MAIN) or {})
    sidecars = {name: sidecar(svc or {}, limits) for name, svc in services.items()
                if name != MAIN}
    out = {"services": sidecars,
           "networks": {"default": {"internal": not limits.public, "labels": dict(limits.labels)}}}
    if config.get("volumes"):
        out["volumes"] = {name: {**(spec or {}), "labels": dict(limits.labels)}
                          for name, spec in config["volumes"].items()}
    return out, request
