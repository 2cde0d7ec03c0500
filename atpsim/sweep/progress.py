"""The sweep's progress bar (rich): points done, rate, elapsed and remaining time."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """Points per second (or seconds per point when slower than one a second)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if not speed:
            return Text("-- pt/s", style="progress.data.speed")
        text = f"{speed:.1f} pt/s" if speed >= 1 else f"{1 / speed:.1f} s/pt"
        return Text(text, style="progress.data.speed")


class SweepProgress:
    """A context manager around a rich progress bar; a no-op when *enabled* is false."""

    def __init__(self, total: int, done: int, *, enabled: bool, console: Console | None = None):
        self.failed = 0
        self._progress: Progress | None = None
        if enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                RateColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=console or Console(stderr=True),
                transient=False,
            )
            self._task = self._progress.add_task(self._label(), total=total, completed=done)

    def _label(self) -> str:
        return f"points ({self.failed} failed)" if self.failed else "points"

    def __enter__(self) -> SweepProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, *, failed: bool) -> None:
        """Count one finished point (*failed* or not)."""
        self.failed += int(failed)
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=self._label())
