"""The scoring child of the reasoning-gym suite: reads requests, returns scores.

Run as `python -I -m posttrain.tasks.suites.rgym.worker` by scorer.py, never in the trainer.
A reply is hostile model output, and several reasoning-gym scorers evaluate it (`eval`,
sympy's `parse_expr`), so this process is the boundary (docs/domains-ecosystem.md):

- resource limits: address space, no files written, no core dumps, no new processes
  (RLIMIT_NPROC binds a non-root user only), CPU seconds per reply; the parent kills it past
  a per-reply wall-clock timeout;
- an audit hook, armed while a reply is scored, refuses compiling source text that holds a
  double underscore (the way out of any `eval` namespace), starting processes, sockets, ctypes,
  opening files for writing or outside the interpreter's and its packages' directories, and
  changing the file system. A refused event raises inside the scorer; the reply scores 0 and
  its record says `refused`.

Protocol: one JSON object per line on stdin ({"id", "cpu_s", "dataset", "config", "entry", "reply"});
one JSON object per line on the result fd ({"id", "score", "refused"} or {"error"}); stdout
and stderr go nowhere, so nothing the scored code prints can pass for a result, and a line
with another id (written by scored code that found the fd) is taken for a broken child.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import sys
from functools import lru_cache

MEMORY_BYTES = 4 << 30
REFUSED_EVENTS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                  "subprocess.Popen", "pty.spawn", "socket.", "ctypes.", "os.remove", "os.rename",
                  "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.kill", "os.truncate",
                  "os.symlink", "os.link", "os.putenv", "os.unsetenv", "shutil.", "pickle.find_class",
                  "sys._getframe", "sys.settrace", "sys.setprofile", "gc.get_", "code.__new__",
                  "function.__new__", "webbrowser.open")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class Guard:
    """The audit hook's state: armed while a reply is scored; the events it refused.
    readable: the only directories a file may be opened in while armed (the interpreter's and
    its packages', for lazy imports and the datasets' data files)."""

    def __init__(self, readable: tuple[str, ...]) -> None:
        self.armed = False
        self.refused: list[str] = []
        self.readable = readable

    def __call__(self, event: str, args: tuple) -> None:
        if self.armed and self._forbidden(event, args):
            self.refused.append(event)
            raise PermissionError(f"refused while scoring: {event}")

    def _forbidden(self, event: str, args: tuple) -> bool:
        if event == "compile":
            return has_dunder(args[0])
        if event == "open":
            return self._writes(args[1], args[2]) or not self._readable(args[0])
        return event.startswith(REFUSED_EVENTS)

    @staticmethod
    def _writes(mode, flags) -> bool:
        return any(c in (mode or "") for c in "wax+") or bool((flags or 0) & WRITE_FLAGS)

    def _readable(self, path) -> bool:
        if isinstance(path, int):            # an fd already open (a read: writes are refused)
            return True
        real = os.path.realpath(os.fsdecode(path))
        return any(real == d or real.startswith(d + os.sep) for d in self.readable)


def has_dunder(source) -> bool:
    """Whether source text, or a syntax tree's names, attributes and strings, hold `__`."""
    if isinstance(source, str):
        return "__" in source
    if isinstance(source, bytes):
        return b"__" in source
    if isinstance(source, ast.AST):          # every text field: names, attributes, constants
        return any(isinstance(value, (str, bytes)) and has_dunder(value)
                   for node in ast.walk(source) for _, value in ast.iter_fields(node))
    return True                 # any other kind of source is not ours to guess about


def readable_dirs() -> tuple[str, ...]:
    """The interpreter's prefixes and every directory imports come from (site-packages, an
    editable install's source), resolved."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if os.path.isdir(p))}
    return tuple(sorted({os.path.realpath(d) for d in dirs} - {"/"}))


@lru_cache(maxsize=64)
def dataset(name: str, config: str):
    """One dataset object per (name, config): score_answer may read its config."""
    import reasoning_gym

    return reasoning_gym.create_dataset(name, **json.loads(config))


def score(request: dict, guard: Guard) -> dict:
    """{"score", "refused"} of one reply; a scorer's exception scores 0."""
    from reasoning_gym.utils import extract_answer

    ds = dataset(request["dataset"], json.dumps(request["config"], sort_keys=True))
    cap_cpu(request["cpu_s"])
    guard.refused.clear()
    guard.armed = True
    try:
        value = float(ds.score_answer(extract_answer(request["reply"]), request["entry"]))
    except Exception:  # noqa: BLE001 - the dataset's own scorer failed on this reply: no reward
        value = 0.0
    finally:
        guard.armed = False
    if guard.refused:          # caught or not by the scorer, a refused reply earns nothing
        value = 0.0
    return {"id": request["id"], "score": value, "refused": sorted(set(guard.refused))}


def cap_cpu(seconds: int) -> None:
    """SIGXCPU (death) once this reply has used `seconds` of CPU: a child left computing after
    its parent died stops by itself, however long the C call it is stuck in."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime) + 1 + seconds, hard))


def limit() -> None:
    """The limits the scored code runs under (lowered only: never raised back)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def main() -> None:
    results = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    try:
        import reasoning_gym  # noqa: F401  (every dataset registers itself on import)
        import sympy  # noqa: F401  (the scorers that parse expressions use it)
    except ImportError as e:
        results.write(json.dumps({"error": f"{e.name} is not installed"}) + "\n")
        return
    guard = Guard(readable_dirs())
    sys.addaudithook(guard)
    limit()
    results.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            reply = score(json.loads(line), guard)
        except Exception as e:  # noqa: BLE001 - a bad request (unknown dataset, config): the parent says so
            reply = {"id": None, "error": f"{type(e).__name__}: {e}"}
        results.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
