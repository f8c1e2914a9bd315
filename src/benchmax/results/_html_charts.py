"""The reward charts of the ``view`` page: inline SVG drawn from the run's ``ReportTally`` (a
histogram per reward key, and its mean per termination reason)."""

from __future__ import annotations

import html
import math
from array import array
from collections.abc import Mapping, Sequence

from benchmax._vocabulary import FINISHED
from benchmax.results._report import ReportTally

__all__ = ["charts_section", "reason_class"]

_HISTOGRAM_BINS = 20


def reason_class(reason: str) -> str:
    """The page's CSS class of a termination reason: ``ok`` for ``finished``, else ``bad``."""
    return "ok" if reason == FINISHED else "bad"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def charts_section(tally: ReportTally) -> str:
    """The charts of every reward key with a finite value, from the tally's values."""
    keys = tally.reward_keys
    if not keys:
        return ""
    reasons = tally.reasons
    cards = []
    for key in keys:
        values: array[float] = array("d")
        by_reason: dict[str, array[float]] = {}
        for value, number in zip(*tally.reward_values(key), strict=True):
            # The charts draw finite values; NaN and infinities show in the tables.
            if math.isfinite(value):
                values.append(value)
                by_reason.setdefault(reasons[number], array("d")).append(value)
        if values:
            cards.append(
                f'<div class="chart-card" data-key="{_e(key)}"><h3><code>{_e(key)}</code></h3>'
                f"{_histogram_svg(key, values)}{_by_reason_svg(key, by_reason)}</div>"
            )
    return (
        '<section id="charts" class="card"><h2>Reward charts</h2>'
        f'<div class="charts">{"".join(cards)}</div></section>'
    )


def _histogram_svg(key: str, values: Sequence[float]) -> str:
    """Bars counting the rollouts per value range (0 and 1 only: two bars)."""
    low, high = min(values), max(values)
    if all(v in (0, 1) for v in values):
        labels = ["0", "1"]
        counts = [sum(v == 0 for v in values), sum(v == 1 for v in values)]
        ranges = ["= 0", "= 1"]
    elif low == high:
        labels, counts, ranges = [f"{low:g}"], [len(values)], [f"= {low:g}"]
    else:
        # Halves keep the span of values near the float limit finite.
        half_span = high / 2 - low / 2
        width = half_span / _HISTOGRAM_BINS * 2
        counts = [0] * _HISTOGRAM_BINS
        for v in values:
            counts[
                min(int((v / 2 - low / 2) / half_span * _HISTOGRAM_BINS), _HISTOGRAM_BINS - 1)
            ] += 1
        labels = [""] * _HISTOGRAM_BINS
        labels[0], labels[-1] = f"{low:.3g}", f"{high:.3g}"
        ranges = [
            f"{low + i * width:.3g} to {low + (i + 1) * width:.3g}" for i in range(_HISTOGRAM_BINS)
        ]
    w, h, pad_l, pad_b, pad_t = 340, 150, 34, 22, 10
    peak = max(counts) or 1
    slot = (w - pad_l - 6) / len(counts)
    bar = max(1.0, slot * 0.82)
    parts = [
        f'<svg class="chart" viewBox="0 0 {w} {h}" role="img" data-testid="histogram-{_e(key)}"'
        f' aria-label="histogram of {_e(key)}">'
        f"<title>distribution of {_e(key)} over rollouts</title>",
        f'<line class="axis" x1="{pad_l}" y1="{h - pad_b}" x2="{w - 4}" y2="{h - pad_b}"/>',
        f'<text class="tick" x="{pad_l - 4}" y="{pad_t + 4}" text-anchor="end">{peak:,}</text>',
        f'<text class="tick" x="{pad_l - 4}" y="{h - pad_b}" text-anchor="end">0</text>',
    ]
    for i, (count, label, span) in enumerate(zip(counts, labels, ranges, strict=True)):
        x = pad_l + 3 + i * slot + (slot - bar) / 2
        height = (h - pad_b - pad_t) * count / peak
        y = h - pad_b - height
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}">'
            f"<title>{_e(key)} {_e(span)}: {count:,} rollouts</title></rect>"
        )
        if label:
            parts.append(
                f'<text class="tick" x="{x + bar / 2:.1f}" y="{h - 6}" text-anchor="middle">'
                f"{_e(label)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _by_reason_svg(key: str, by_reason: Mapping[str, Sequence[float]]) -> str:
    """One horizontal bar per termination reason: the mean of ``key``, with the count."""
    rows = sorted(by_reason.items(), key=lambda item: -len(item[1]))
    means = {reason: math.fsum(x / len(v) for x in v) for reason, v in rows}
    low = min(0.0, *means.values())
    high = max(0.0, *means.values())
    if high == low:
        high = low + 1.0
    w, row_h, label_w, pad = 360, 22, 130, 92
    h = row_h * len(rows) + 8
    span = w - label_w - pad
    low, high = low / 2, high / 2  # halves: the span of values near the float limit stays finite
    zero = label_w + span * (0 - low) / (high - low)
    parts = [
        f'<svg class="chart" viewBox="0 0 {w} {h}" role="img" data-testid="by-reason-{_e(key)}"'
        f' aria-label="mean {_e(key)} by termination reason">'
        f"<title>mean {_e(key)} by termination reason</title>",
    ]
    for i, (reason, vals) in enumerate(rows):
        y = 4 + i * row_h
        mean = means[reason]
        x_end = label_w + span * (mean / 2 - low) / (high - low)
        x, width = min(zero, x_end), max(abs(x_end - zero), 1.0)
        parts.append(
            f'<text class="label" x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
            f"{_e(_clip(reason, 20))}</text>"
            f'<rect class="bar {reason_class(reason)}" x="{x:.1f}" y="{y + 3}" '
            f'width="{width:.1f}" height="{row_h - 8}"><title>{_e(reason)}: mean {_e(key)} '
            f"{mean:.3f} over {len(vals):,} rollouts</title></rect>"
            f'<text class="tick" x="{max(x + width, zero) + 4:.1f}" y="{y + 14}">'
            f"{mean:.2f} ({len(vals):,})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
