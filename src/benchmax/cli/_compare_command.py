"""The ``compare`` command: run B against run A on the examples both ran, and the
rendering ``benchmax train`` reuses (``render_comparison``)."""

from __future__ import annotations

from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.cli._json_output import echo_json
from benchmax.cli._options import json_option
from benchmax.cli._results_reading import reading
from benchmax.cli._tables import add_columns, print_whole
from benchmax.results import Comparison, compare_files

__all__ = ["compare_command", "render_comparison"]


@click.command("compare")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--key", metavar="KEY", help="Reward key for the changed-most list.")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    metavar="N",
    help="List the N examples that changed most.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap random seed.")
@click.option(
    "--resamples",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    metavar="R",
    help="Bootstrap resamples.",
)
@json_option()
def compare_command(
    a: Path, b: Path, key: str | None, top: int, seed: int, resamples: int, as_json: bool
) -> None:
    """Compare run B with run A on the examples both ran (matched by example id).

    Per reward key: the means, the paired difference B - A with a percentile-bootstrap 95%
    interval over examples, the share of examples that got better, worse or stayed equal,
    and pass@k of binary keys.
    """
    try:
        with reading(a), reading(b):
            comparison = compare_files(a, b, key=key, top=top, resamples=resamples, seed=seed)
    except ValueError as error:
        raise click.ClickException(f"cannot compare {a} and {b}: {error}") from None
    if as_json:
        echo_json({"a": str(a), "b": str(b), **comparison.to_json()})
        return
    render_comparison(comparison, a, b, Console(), top=top)


def render_comparison(
    comparison: Comparison, a: Path, b: Path, console: Console, *, top: int = 10
) -> None:
    """Print ``comparison`` (run B against run A) as ``benchmax compare`` does: the per-key
    table with paired intervals, pass@k of binary keys and the examples that changed most."""
    console.print(
        f"matched {comparison.matched} examples by id"
        + (f"; {comparison.only_in_a} only in A" if comparison.only_in_a else "")
        + (f"; {comparison.only_in_b} only in B" if comparison.only_in_b else ""),
        soft_wrap=True,
    )
    console.print(f"A: {escape(str(a))}\nB: {escape(str(b))}", soft_wrap=True)
    table = Table(
        title="B - A per reward key (example means)", title_justify="left", box=box.SIMPLE_HEAD
    )
    add_columns(table, "key", "A", "B", "B - A", "95% CI", "better/\nworse/equal")
    for item in comparison.keys:
        low, high = item.interval
        table.add_row(
            escape(item.key),
            f"{item.mean_a:.3f}",
            f"{item.mean_b:.3f}",
            f"{item.difference:+.3f}",
            f"[{low:+.3f}, {high:+.3f}]",
            f"{item.better:.0%}/{item.worse:.0%}/{item.equal:.0%}",
        )
    print_whole(console, table)
    binary = [item for item in comparison.keys if item.pass_a and item.pass_b]
    if binary:
        passes = Table(title="pass@k (binary keys)", title_justify="left", box=box.SIMPLE_HEAD)
        add_columns(passes, "key", "k", "pass@1 A", "pass@1 B", "pass@k A", "pass@k B")
        for item in binary:
            assert item.pass_a is not None and item.pass_b is not None
            passes.add_row(
                escape(item.key),
                f"{item.pass_a.k}/{item.pass_b.k}"
                if item.pass_a.k != item.pass_b.k
                else str(item.pass_a.k),
                f"{item.pass_a.pass_at_1:.3f}",
                f"{item.pass_b.pass_at_1:.3f}",
                f"{item.pass_a.pass_at_k:.3f}",
                f"{item.pass_b.pass_at_k:.3f}",
            )
        print_whole(console, passes)
    for name, keys in (("A", comparison.keys_only_in_a), ("B", comparison.keys_only_in_b)):
        if keys:
            console.print(f"reward keys only in {name}: {escape(', '.join(keys))}")
    if comparison.changed_most:
        changes = Table(
            title=f"examples that changed most ({escape(comparison.changed_most[0].key)})",
            title_justify="left",
        )
        add_columns(changes, "example id", "A", "B", "B - A")
        for change in comparison.changed_most:
            changes.add_row(
                escape(change.example_id),
                f"{change.mean_a:.3f}",
                f"{change.mean_b:.3f}",
                f"{change.difference:+.3f}",
            )
        print_whole(console, changes)
    elif top:
        console.print("no example changed")
