"""Progress bars for a recipe's phases (rich), silent when no console is given."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


class Phases:
    def __init__(self, console: Console | None, totals: dict[str, int]):
        self.console, self.totals = console, totals
        self._progress: Progress | None = None
        self._ids: dict[str, int] = {}

    def __enter__(self) -> Phases:
        if self.console is not None:
            self._progress = Progress(
                TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=self.console)
            self._progress.__enter__()
            self._ids = {name: self._progress.add_task(name, total=max(total, 1), info="")
                         for name, total in self.totals.items()}
        return self

    def advance(self, name: str, n: int = 1, **info: float) -> None:
        if self._progress is None:
            return
        text = "  ".join(f"{k}={v:.3f}" for k, v in info.items())
        self._progress.update(self._ids[name], advance=n, info=text)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
