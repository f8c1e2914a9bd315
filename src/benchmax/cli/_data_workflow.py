"""The core of the data commands (``benchmax generate-qa``, ``benchmax traces``): the
command line parses their options, this runs the workflow and reports it.

:func:`run_workflow` runs a workflow's coroutine with the model's credentials bound and
a progress bar per stage on the terminal, and turns the errors a user can act on (a bad
input, an output directory that cannot be written) into the command's error message;
:func:`summary_table`, :func:`print_skipped` and :func:`wrote_splits` write its summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import click
import rich.progress
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.auth import ModelAuth, bind_model_auth

__all__ = ["StageProgress", "print_skipped", "run_workflow", "summary_table", "wrote_splits"]


class StageProgress:
    """One progress bar per stage of a workflow, called as ``(stage, done, total)``;
    a stage's bar counts in ``units[stage]`` (``default_unit`` for a stage not named)."""

    def __init__(
        self, console: Console, units: Mapping[str, str], *, default_unit: str = "rows"
    ) -> None:
        self.bars = rich.progress.Progress(
            rich.progress.TextColumn("[bold]{task.description}"),
            rich.progress.BarColumn(),
            rich.progress.MofNCompleteColumn(),
            rich.progress.TextColumn("{task.fields[unit]}"),
            rich.progress.TimeElapsedColumn(),
            console=console,
        )
        self._units = dict(units)
        self._default_unit = default_unit
        self._stages: dict[str, rich.progress.TaskID] = {}

    def start(self, stage: str) -> None:
        """Show ``stage``'s bar before its total is known."""
        if stage not in self._stages:
            unit = self._units.get(stage, self._default_unit)
            self._stages[stage] = self.bars.add_task(stage, total=None, unit=unit)

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.start(stage)
        self.bars.update(self._stages[stage], completed=done, total=total)


def run_workflow[Result](
    work: Callable[[], Awaitable[Result]],
    *,
    progress: StageProgress,
    output_dir: Path,
    refused: tuple[type[Exception], ...],
    credentials: Mapping[str, ModelAuth] | None = None,
    quiet_logs: bool = False,
) -> Result:
    """``work()`` run to its end under ``progress``'s bars, with ``credentials`` bound to
    their ``InjectedAuth`` names; its result.

    ``refused`` errors (bad inputs) and an ``OSError`` (``cannot write to OUTPUT_DIR``)
    become a ``click.ClickException`` with their message. ``quiet_logs`` keeps log
    records from the terminal while it runs (the summary counts what they would say).
    """

    async def run() -> Result:
        bound = contextlib.nullcontext() if credentials is None else bind_model_auth(credentials)
        with bound, progress.bars:
            return await work()

    try:
        with _logs_kept_quiet(quiet_logs):
            return asyncio.run(run())
    except refused as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"cannot write to {output_dir}: {error}") from None


@contextlib.contextmanager
def _logs_kept_quiet(quiet: bool) -> Iterator[None]:
    if not quiet:
        yield
        return
    handler = logging.NullHandler()  # the root logger has a handler: no last-resort output
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)


def summary_table(title: str, rows: Iterable[tuple[str, object]]) -> Table:
    """A two-column ``what | count`` table titled ``title``, its cells escaped."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in rows:
        table.add_row(escape(label), escape(str(value)))
    return table


def print_skipped(console: Console, shown: Sequence[str], total: int) -> None:
    """``skipped <item>`` for each of ``shown``, then ``... and N more`` for the rest of
    ``total``."""
    for item in shown:
        console.print(f"[yellow]skipped[/] {escape(item)}", soft_wrap=True)
    if total > len(shown):
        console.print(f"... and {total - len(shown)} more")


def wrote_splits(train_path: Path, eval_path: Path) -> str:
    """The line saying where the two splits were written (rich markup, paths escaped)."""
    return f"wrote {escape(str(train_path))} and {escape(str(eval_path))}"
