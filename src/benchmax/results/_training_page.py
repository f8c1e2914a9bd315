"""The training page (``benchmax view OUTPUT``): a run directory as one offline HTML file.

Charts are SVG drawn here (no script library, no network): the scalar reward and each
reward key per step, termination reasons per step, completion lengths, the trainer's loss,
KL, entropy and grad norm, and the eval points; then base vs final (``eval/compare.json``).
Below them is the results report of ``rollouts.jsonl`` (``render_html_report``), whose
examples table gains a step filter: clicking a step's point shows that step's groups and
opens the first.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmax.results._errors import RunError
from benchmax.results._html_report import HtmlReport, render_html_report
from benchmax.results._reading import read_results
from benchmax.results._run_directory import RunDirectory, read_metrics, saved_comparison
from benchmax.results._selection import groups_of, reward_keys_of
from benchmax.results._step_metrics import MetricsLine

__all__ = ["is_training_run", "write_training_page"]

_WIDTH, _HEIGHT, _PAD = 420, 180, 34
_COLORS = ("#3b5bdb", "#2f9e44", "#e67700", "#c2255c", "#6741d9", "#0c8599", "#868e96")


def is_training_run(path: Path) -> bool:
    """Whether ``path`` is a training run directory (it holds ``rollouts.jsonl``)."""
    return path.is_dir() and RunDirectory(path).rollouts.is_file()


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _finite(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


type Series = Sequence[tuple[int, float]]


def _line_chart(title: str, series: Mapping[str, Series], *, testid: str, steps: bool) -> str:
    """Lines with a point per step (``data-step`` when ``steps``: clicking opens it)."""
    drawn = {name: points for name, points in series.items() if points}
    if not drawn:
        return ""
    xs = [x for points in drawn.values() for x, _ in points]
    ys = [y for points in drawn.values() for _, y in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y0 == y1:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def at(x: float, y: float) -> tuple[float, float]:
        span = (x1 - x0) or 1
        px = _PAD + (x - x0) / span * (_WIDTH - 2 * _PAD)
        py = _HEIGHT - _PAD + (y - y0) / (y1 - y0) * (2 * _PAD - _HEIGHT) + 6
        return round(px, 1), round(py, 1)

    parts = [
        f'<line class="axis" x1="{_PAD}" y1="{_HEIGHT - _PAD + 6}" x2="{_WIDTH - _PAD}" '
        f'y2="{_HEIGHT - _PAD + 6}"/>',
        f'<text class="tick" x="2" y="{at(x0, y1)[1] + 4}">{y1:.3g}</text>',
        f'<text class="tick" x="2" y="{at(x0, y0)[1] + 4}">{y0:.3g}</text>',
        f'<text class="tick" x="{_PAD}" y="{_HEIGHT - 6}">step {x0}</text>',
        f'<text class="tick" x="{_WIDTH - _PAD - 40}" y="{_HEIGHT - 6}">step {x1}</text>',
    ]
    legend = []
    for number, (name, points) in enumerate(drawn.items()):
        color = _COLORS[number % len(_COLORS)]
        path = " ".join(f"{px},{py}" for px, py in (at(x, y) for x, y in points))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{path}"/>')
        for x, y in points:
            px, py = at(x, y)
            step = f' data-step="{x}"' if steps else ""
            parts.append(
                f'<circle class="pt" cx="{px}" cy="{py}" r="3.2" fill="{color}"{step}'
                f' data-series="{_e(name)}"><title>{_e(name)} at step {x}: {y:.4g}</title>'
                "</circle>"
            )
        legend.append(f'<span class="legend"><i style="background:{color}"></i>{_e(name)}</span>')
    return (
        f'<div class="chart-card" data-testid="{_e(testid)}"><h3>{_e(title)}</h3>'
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img">{"".join(parts)}</svg>'
        f'<div class="legends">{"".join(legend)}</div></div>'
    )


def _reasons_chart(lines: Sequence[MetricsLine]) -> str:
    """Stacked bars: rollouts per termination reason, one bar per step."""
    if not lines:
        return ""
    reasons = sorted({r for line in lines for r in (line.get("termination_reasons") or {})})
    reasons.sort(key=lambda r: r != "finished")
    highest = max(sum((line.get("termination_reasons") or {}).values()) for line in lines) or 1
    width = (_WIDTH - 2 * _PAD) / len(lines)
    bars = []
    for number, line in enumerate(lines):
        counts = line.get("termination_reasons") or {}
        bottom: float = _HEIGHT - _PAD + 6
        for reason in reasons:
            count = counts.get(reason, 0)
            if not count:
                continue
            height = count / highest * (_HEIGHT - 2 * _PAD)
            color = _COLORS[reasons.index(reason) % len(_COLORS)]
            bars.append(
                f'<rect class="reason-bar" x="{_PAD + number * width + 1:.1f}"'
                f' y="{bottom - height:.1f}"'
                f' width="{max(width - 2, 1):.1f}" height="{height:.1f}" style="fill:{color}"'
                f' data-step="{line["step"]}" data-reason="{_e(reason)}"><title>step '
                f"{line['step']}: {count} {_e(reason)}</title></rect>"
            )
            bottom -= height
    legend = "".join(
        f'<span class="legend"><i style="background:{_COLORS[i % len(_COLORS)]}"></i>'
        f"{_e(reason)}</span>"
        for i, reason in enumerate(reasons)
    )
    return (
        '<div class="chart-card" data-testid="chart-reasons"><h3>termination reasons</h3>'
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img">'
        f'<text class="tick" x="2" y="{_PAD}">{highest}</text>{"".join(bars)}</svg>'
        f'<div class="legends">{legend}</div></div>'
    )


def _series(lines: Sequence[MetricsLine], *path: str) -> list[tuple[int, float]]:
    points = []
    for line in lines:
        value: object = line
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        number = _finite(value)
        if number is not None:
            points.append((int(line["step"]), number))
    return points


def _eval_points(
    layout: RunDirectory, warn: Callable[[str], None]
) -> dict[str, list[tuple[int, float]]]:
    """Per reward key, the mean over each evaluation's rollouts, by step (an eval file that
    cannot be read is left out, passed to ``warn``)."""
    points: dict[str, list[tuple[int, float]]] = {}
    for step in layout.eval_steps():
        path = layout.eval_file(step)
        try:
            results = read_results(path)
            means = {
                key: [r.rewards[key] for r in results.rollouts if key in r.rewards]
                for key in reward_keys_of(results)
            }
        except (OSError, ValueError, RunError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            warn(f"eval/{path.name}: skipped, it cannot be read ({reason})")
            continue
        for key, values in means.items():
            if values:
                points.setdefault(key, []).append((step, math.fsum(values) / len(values)))
    return points


def _comparison_section(layout: RunDirectory) -> str:
    data = saved_comparison(layout)
    if data is None:
        return (
            '<section id="compare" class="card"><h2>Base vs final</h2><p class="muted">'
            "Written at the end of the run (eval/compare.json).</p></section>"
        )
    rows = "".join(
        f'<tr data-key="{_e(item["key"])}"><td><code>{_e(item["key"])}</code></td>'
        f'<td class="num">{_fmt(item["mean_a"])}</td><td class="num">{_fmt(item["mean_b"])}</td>'
        f'<td class="num" data-testid="difference-{_e(item["key"])}">'
        f"{_fmt(item['difference'], sign=True)}</td>"
        f'<td class="num">[{_fmt(item["interval"][0], sign=True)}, '
        f"{_fmt(item['interval'][1], sign=True)}]</td>"
        f'<td class="num">{item["better"]:.0%}/{item["worse"]:.0%}/{item["equal"]:.0%}</td></tr>'
        for item in data.get("keys", [])
    )
    return (
        '<section id="compare" class="card" data-testid="compare"><h2>Base vs final</h2>'
        f'<p class="muted">{_e(data.get("a"))} (A) against {_e(data.get("b"))} (B), '
        f"{data.get('matched')} eval examples matched by id; paired bootstrap 95% intervals.</p>"
        '<table class="grid"><thead><tr><th>key</th><th class="num">base</th>'
        '<th class="num">final</th><th class="num">final - base</th><th class="num">95% CI</th>'
        '<th class="num">better/worse/equal</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></section>"
    )


def _fmt(value: object, *, sign: bool = False) -> str:
    number = _finite(value)
    if number is None:
        return "\u2013"
    return f"{number:+.3f}" if sign else f"{number:.3f}"


_STYLE = (
    "<style>.legends{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;color:#6b7280}"
    ".legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}"
    "svg .pt,svg rect[data-step]{cursor:pointer}svg .pt:hover{r:5}</style>"
)


def training_sections(
    layout: RunDirectory, keys: Sequence[str], warn: Callable[[str], None]
) -> str:
    """The page's training sections (charts, evals, base vs final), as HTML; a damaged
    ``metrics.jsonl`` line or eval file is left out and passed to ``warn`` (one line)."""
    skipped: list[str] = []

    def skip(message: str) -> None:
        skipped.append(message)
        warn(message)

    lines = list(
        read_metrics(
            layout.metrics,
            skipped=lambda number, problem: skip(f"metrics.jsonl:{number}: skipped, {problem}"),
        )
    )
    rewards = {"reward (scalar)": _series(lines, "reward")}
    rewards.update({key: _series(lines, "rewards", key) for key in keys})
    lengths = {stat: _series(lines, "completion_tokens", stat) for stat in ("mean", "min", "max")}
    trainer = {
        name: _series(lines, "trainer", name) for name in ("loss", "kl", "entropy", "grad_norm")
    }
    shares = {
        "zero-variance groups": _series(lines, "zero_variance_group_share"),
        "non-trainable rollouts": _series(lines, "non_trainable_share"),
    }
    charts = [
        _line_chart("rewards per step (mean)", rewards, testid="chart-rewards", steps=True),
        _reasons_chart(lines),
        _line_chart("completion tokens per rollout", lengths, testid="chart-lengths", steps=True),
        _line_chart("group signal", shares, testid="chart-shares", steps=True),
        _line_chart(
            "eval split (mean per key)",
            _eval_points(layout, skip),
            testid="chart-eval",
            steps=False,
        ),
    ]
    charts += [
        _line_chart(name, {name: points}, testid=f"chart-{name}", steps=True)
        for name, points in trainer.items()
    ]
    note = (
        f"{len(lines)} step(s) in metrics.jsonl · click a point or bar to read that step's "
        "groups below"
    )
    if skipped:
        note += " · left out: " + "; ".join(skipped)
    return (
        f'{_STYLE}<section id="training" class="card" data-testid="training">'
        f'<h2>Training</h2><p class="muted">{_e(note)}</p>'
        f'<div class="charts">{"".join(charts)}</div></section>' + _comparison_section(layout)
    )


def write_training_page(
    root: str | Path, output: str | Path | None = None, *, tokens: bool = False
) -> HtmlReport:
    """Write the training page of run directory ``root`` (default ``root/training.html``).

    Works on a run still going (its complete groups and written steps). Raises
    ``ResultsFileError`` when ``rollouts.jsonl`` is not a results file and ``OSError``
    when reading or writing fails.
    """
    started = time.perf_counter()
    layout = RunDirectory(Path(root))
    results = read_results(layout.rollouts)
    keys = reward_keys_of(results)
    warnings: list[str] = []
    page = render_html_report(
        results,
        source=str(layout.rollouts),
        tokens=tokens,
        title=f"benchmax training {layout.root.name}",
        before=training_sections(layout, keys, warnings.append),
    )
    target = Path(output) if output is not None else layout.page
    data = page.encode("utf-8", "backslashreplace")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return HtmlReport(
        path=target,
        size_bytes=len(data),
        build_seconds=time.perf_counter() - started,
        groups=len(groups_of(results)),
        rollouts=len(results.rollouts),
        warnings=tuple(warnings),
    )
