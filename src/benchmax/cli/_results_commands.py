"""The ``view`` command: a results file (or a train output directory) as an HTML page.

``show``, ``rescore`` and ``compare`` are in ``_show_command``, ``_rescore_command`` and
``_compare_command``."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from benchmax.cli._options import FiniteRange, output_option
from benchmax.cli._results_reading import reading as _reading
from benchmax.results import TRANSCRIPT_BUDGET, write_html_report

__all__ = ["view_command"]


def _size(count: int) -> str:
    size: float = count
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{count} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


# ---- view ---------------------------------------------------------------------------------


@click.command("view")
@click.argument("results", type=click.Path(path_type=Path))
@output_option("the HTML report (default: RESULTS with suffix .html)")
@click.option("--open", "open_page", is_flag=True, help="Open the report in a web browser.")
@click.option(
    "--tokens",
    is_flag=True,
    help="Embed the recorded token ids and logprobs, shown per assistant turn "
    "(every turn shows its token count and mean logprob without it).",
)
@click.option(
    "--transcript-budget",
    "budget_mb",
    type=FiniteRange(min=0),
    default=TRANSCRIPT_BUDGET / 2**20,
    show_default=True,
    metavar="MB",
    help="Embed the transcripts of the groups read first, up to this many MB of them; "
    "later groups show their rewards and the show command that prints them (0: none).",
)
def view_command(
    results: Path, output: Path | None, open_page: bool, tokens: bool, budget_mb: float
) -> None:
    """Write a self-contained HTML report of RESULTS (no server, works offline).

    RESULTS may be a benchmax train output directory: its training page (reward curves,
    termination reasons, lengths, evals and base vs final per step, then every step's
    groups; default OUTPUT/training.html).

    The page shows the run, its summary and reward charts, a sortable and filterable table
    of examples, and every group's transcripts side by side. A file still being written
    shows its complete groups. The file is read as a stream; the page embeds the
    transcripts of the groups read first, up to --transcript-budget MB of them, and names
    the show command that prints any later group's.
    """
    from benchmax.results import is_training_run, write_training_page

    training = is_training_run(results)
    with _reading(results):
        try:
            if training:
                report = write_training_page(results, output, tokens=tokens)
            else:
                report = write_html_report(
                    results, output, tokens=tokens, transcript_budget=int(budget_mb * 2**20)
                )
        except OSError as error:  # reading errors are ResultsFileError: this is the page
            default = results / "training.html" if training else results.with_suffix(".html")
            page = output if output is not None else default
            raise click.ClickException(f"cannot write {page}: {error.strerror or error}") from None
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(
        f"wrote {report.path} ({_size(report.size_bytes)}, {report.groups} groups, "
        f"{report.rollouts} rollouts) in {report.build_seconds:.2f} s"
    )
    if report.omitted_groups:
        import shlex

        click.echo(
            f"transcripts of {report.omitted_groups} groups read after the page's transcript "
            f"budget are not in it (benchmax show {shlex.quote(str(results))} --example ID "
            "prints one)"
        )
    if open_page:
        webbrowser.open(report.path.resolve().as_uri())
