"""``benchmax view``: one self-contained HTML file that shows a results file.

The page needs no server and no network: styles, script, charts (inline SVG drawn here)
and the data (JSON in a ``<script type="application/json">`` element) are all inline, so it
opens from ``file://`` and works as a CI artifact. The summary and charts are static HTML;
the examples table and a group's transcripts are built by the page's script on demand,
with DOM text nodes only (never ``innerHTML``), so model and tool output renders as text.

``write_html_report`` reads the file as a stream (``SpooledGroups``: one pass, the groups
on disk, the summary a running ``ReportTally``) and writes the page piece by piece, so its
memory is bounded by the summary, not by the file; transcripts beyond ``TRANSCRIPT_BUDGET``
are left out of the page (the page names the ``benchmax show`` command that prints them).
``render_html_report`` builds the same page from ``Results`` already in memory.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from benchmax._file_replace import replace_file
from benchmax.results._html_charts import charts_section
from benchmax.results._html_sections import definition_section, summary_section
from benchmax.results._page_data import (
    GroupEntry,
    add_to,
    compacted,
    data_head,
    embedded_pieces,
    group_entry,
    reward_weights_of,
)
from benchmax.results._reading import Results
from benchmax.results._report import ReportTally
from benchmax.results._selection import groups_of
from benchmax.results._view_spool import TRANSCRIPT_BUDGET, SpooledGroups

__all__ = ["HtmlReport", "render_html_report", "report_data", "write_html_report"]

_PLACEHOLDER = re.compile(r"\{\{(TITLE|STATIC|DATA)\}\}")


@dataclass(frozen=True, slots=True)
class HtmlReport:
    """A written report: where, how big (bytes) and how long building it took (seconds);
    ``omitted_groups`` counts the groups whose transcripts were left out (beyond the
    transcript budget); ``warnings`` name what was left out of the page as damaged (one
    line each: a ``metrics.jsonl`` line, an eval file)."""

    path: Path
    size_bytes: int
    build_seconds: float
    groups: int
    rollouts: int
    omitted_groups: int = 0
    warnings: tuple[str, ...] = ()


def write_html_report(
    results_path: str | Path,
    output: str | Path | None = None,
    *,
    tokens: bool = False,
    transcript_budget: int = TRANSCRIPT_BUDGET,
) -> HtmlReport:
    """Build the HTML report of ``results_path`` and write it to ``output``.

    Each assistant message written by a call that recorded exact tokens shows its token
    count and mean logprob; ``tokens`` also embeds the ids and logprobs, shown per turn
    (about 15 KB of page per 1,000 tokens).

    The file is read once as a stream; memory holds the run's summary (a few numbers per
    rollout and reward key), never the file. Groups are spooled to a temporary file beside
    the page; the page embeds the transcripts of the groups read first, up to
    ``transcript_budget`` bytes (64 MB by default), and shows every later group's rewards,
    reasons, timings and usage with the ``benchmax show`` command that prints its
    transcripts. Below the budget the page equals ``render_html_report(read_results(path))``.

    ``output`` defaults to the results file with suffix ``.html``. A file still being
    written (or interrupted) shows its complete groups. The page is written to a temporary
    file and moved into place, so a failed write (a full disk) leaves no truncated page.
    Raises ``ResultsFileError`` for a file that is not a results file (naming ``file:line``
    for a damaged line) and ``OSError`` when reading or writing fails.
    """
    started = time.perf_counter()
    source = Path(results_path)
    target = Path(output) if output is not None else source.with_suffix(".html")
    with SpooledGroups(
        source, target.resolve().parent, tokens=tokens, budget=transcript_budget
    ) as spool:
        tally = ReportTally(reward_weights_of(spool.header))
        omitted = 0
        for entry in spool.entries():
            add_to(tally, entry)
            omitted += "x" in entry
        budget = {"groups": omitted, "budget_bytes": transcript_budget} if omitted else None
        head = data_head(spool.header, str(source), tally, omitted=budget)
        pieces = _page(head, tally, _compacted(spool.entries(), tally))
        written = 0

        def encoded() -> Iterator[bytes]:
            nonlocal written
            for piece in pieces:
                data = piece.encode("utf-8", "backslashreplace")  # a lone surrogate outside
                written += len(data)  # the data (which escapes its own)
                yield data

        replace_file(target, encoded())  # a full disk leaves the old page (or none)
    return HtmlReport(
        path=target,
        size_bytes=written,
        build_seconds=time.perf_counter() - started,
        groups=tally.groups,
        rollouts=tally.rollouts,
        omitted_groups=omitted,
    )


def report_data(
    results: Results, *, source: str | None = None, tokens: bool = False
) -> dict[str, Any]:
    """The data the page embeds: header, summary, reward keys, reasons and every group.

    Compact on purpose: a rollout's rewards are a list in ``keys`` order, its termination
    reason an index into ``reasons``, and the messages every rollout of a group starts with
    (the prompt) are stored once per group as ``p`` (see ``benchmax.results._page_data``).
    """
    entries, tally = _entries_of(results, tokens)
    data = data_head(results.header, source, tally)
    data["groups"] = list(_compacted(entries, tally))
    return data


def render_html_report(
    results: Results,
    *,
    source: str | None = None,
    tokens: bool = False,
    title: str | None = None,
    before: str = "",
) -> str:
    """The complete HTML page for ``results`` (see ``report_data`` for what it embeds).

    ``before`` is trusted HTML put first in the page (the training page's sections; an
    element with ``data-step="N"`` in it filters the examples to step N when clicked and
    opens the first of them); ``title`` replaces the page title.
    """
    entries, tally = _entries_of(results, tokens)
    head = data_head(results.header, source, tally)
    return "".join(_page(head, tally, _compacted(entries, tally), title=title, before=before))


def _entries_of(results: Results, tokens: bool) -> tuple[list[GroupEntry], ReportTally]:
    """Every group's entry in example order, and the tally of them."""
    weights = reward_weights_of(results.header)
    entries = [
        group_entry(group.trajectories, weights=weights, tokens=tokens)
        for group in groups_of(results)
    ]
    tally = ReportTally(weights)
    for entry in entries:
        add_to(tally, entry)
    return entries, tally


def _compacted(entries: Iterable[GroupEntry], tally: ReportTally) -> Iterator[dict[str, object]]:
    keys = tally.reward_keys
    reason_index = {reason: i for i, reason in enumerate(tally.reasons)}
    return (compacted(entry, keys, reason_index) for entry in entries)


def _page(
    head: Mapping[str, Any],
    tally: ReportTally,
    groups: Iterable[dict[str, object]],
    *,
    title: str | None = None,
    before: str = "",
) -> Iterator[str]:
    """The page's text in pieces: the template with its title, its static sections (the
    run's definition, summary and charts) and its data, the groups one by one."""
    header = head["header"]
    title = title or f"benchmax run {header.get('run_id', '')}"
    body = "\n".join(
        [
            before,
            definition_section(header, head["source"]),
            summary_section(head["summary"], head["keys"]),
            charts_section(tally),
        ]
    )
    template = resources.files("benchmax.results").joinpath("_html_report_page.html")
    page = template.read_text(encoding="utf-8")
    values = {"TITLE": _escaped(title), "STATIC": body}
    start = 0
    # One pass, so a placeholder-like string inside the inserted text stays as it is.
    for match in _PLACEHOLDER.finditer(page):
        yield page[start : match.start()]
        name = match.group(1)
        if name == "DATA":
            yield from embedded_pieces(head, groups)
        else:
            yield values[name]
        start = match.end()
    yield page[start:]


def _escaped(value: str) -> str:
    return html.escape(value, quote=True)
