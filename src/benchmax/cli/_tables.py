"""Terminal tables whose numbers are never cut: a label column that gives way on a narrow
terminal, number columns that never wrap (``rescore`` and ``compare``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["add_columns", "print_whole"]


def add_columns(table: Table, label: str, *numbers: str) -> None:
    """A text column ``label`` that folds onto more lines when the terminal is narrow, then
    right-aligned number columns that are never wrapped: on an 80-column terminal the
    label gives way first, so every number stays whole."""
    table.add_column(label, justify="left", overflow="fold", min_width=4)
    for name in numbers:
        table.add_column(name, justify="right", no_wrap=True)


def print_whole(console: Console, table: Table) -> None:
    """Print ``table`` (made with ``add_columns``); when its number columns alone need more
    than the terminal's width, it is printed wider (the terminal wraps its lines) rather
    than with a number cut."""
    needed = len(table.columns) + 1  # borders
    for column in table.columns:
        if column.no_wrap:
            lines = [
                line
                for cell in (column.header, *column.cells)
                for line in Text.from_markup(str(cell)).plain.splitlines()
            ]
            needed += max((len(line) for line in lines), default=0) + 2
        else:
            needed += (column.min_width or 1) + 2
    if needed <= console.width:
        console.print(table)
        return
    width = console.width
    console.width = needed
    try:
        console.print(table)
    finally:
        console.width = width
