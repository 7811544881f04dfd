"""Progress of a recipe's phases: rich bars on a terminal; one plain line per step when the
output is a pipe or a file (nohup, Slurm, CI), where a bar would show nothing until the end;
silent when no console is given. An evaluation phase (`coarse`) prints a line per tenth."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


class Phases:
    def __init__(self, console: Console | None, totals: dict[str, int], coarse: tuple[str, ...] = ()):
        self.console, self.totals, self.coarse = console, dict(totals), coarse
        self._progress: Progress | None = None
        self._ids: dict[str, int] = {}
        self._plain: PlainLines | None = None

    def __enter__(self) -> Phases:
        if self.console is not None and not self.console.is_terminal:
            self._plain = PlainLines(self.console, self.totals, self.coarse)
        elif self.console is not None:
            self._progress = Progress(
                TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=self.console)
            self._progress.__enter__()
            self._ids = {name: self._progress.add_task(name, total=max(total, 1), info="")
                         for name, total in self.totals.items()}
        return self

    def set_total(self, name: str, total: int) -> None:
        """A phase's size once it is known (e.g. held-out episodes, after the tasks are read)."""
        self.totals[name] = total
        if self._progress is not None:
            self._progress.update(self._ids[name], total=max(total, 1))

    def advance(self, name: str, n: int = 1, **info: float) -> None:
        text = "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items())
        if self._plain is not None:
            self._plain.advance(name, n, text)
        elif self._progress is not None:
            self._progress.update(self._ids[name], advance=n, info=text)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


class PlainLines:
    """`rl 3/20 41s reward=0.250`: a line per advance; in a coarse phase a line per tenth, or
    after a quiet minute (a lockstep evaluation can finish few episodes before its last turn)."""

    QUIET_S = 60.0

    def __init__(self, console: Console, totals: dict[str, int], coarse: tuple[str, ...]):
        self.console, self.totals, self.coarse = console, totals, coarse
        self.done = dict.fromkeys(totals, 0)
        self.shown = dict.fromkeys(totals, 0)
        self.t0 = self.last = time.monotonic()

    def advance(self, name: str, n: int, info: str) -> None:
        self.done[name] += n
        done, total, now = self.done[name], max(self.totals[name], 1), time.monotonic()
        tenth = max(1, total // 10)
        quiet = done - self.shown[name] < tenth and now - self.last < self.QUIET_S
        if name in self.coarse and done < total and quiet:
            return
        self.shown[name], self.last = done, now
        line = f"{name} {done}/{total} {now - self.t0:.0f}s"
        self.console.print(f"{line}  {info}" if info else line, markup=False, highlight=False, soft_wrap=True)
