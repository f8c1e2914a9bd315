"""``benchmax view``: one self-contained HTML file that shows a results file.

The page needs no server and no network: styles, script, charts (inline SVG drawn here)
and the data (JSON in a ``<script type="application/json">`` element) are all inline, so it
opens from ``file://`` and works as a CI artifact. The summary and charts are static HTML;
the examples table and a group's transcripts are built by the page's script on demand,
with DOM text nodes only (never ``innerHTML``), so model and tool output renders as text.
"""

from __future__ import annotations

import html
import json
import math
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from benchmax._file_replace import replace_file
from benchmax._vocabulary import FINISHED, TOKEN_USAGE_KEYS
from benchmax.runner._html_charts import charts_section, reason_class
from benchmax.runner._learning_signal import group_signal, scalar_of
from benchmax.runner._records import completed_group
from benchmax.runner._report import RunReport, UsageStats, summarize
from benchmax.runner._results import Results, read_results
from benchmax.runner._selection import ResultGroup, groups_of, reward_keys_of
from benchmax.trajectory import Trajectory

__all__ = ["HtmlReport", "render_html_report", "report_data", "write_html_report"]

DATA_FORMAT = "benchmax.view/1"
_PLACEHOLDER = re.compile(r"\{\{(TITLE|STATIC|DATA)\}\}")


@dataclass(frozen=True, slots=True)
class HtmlReport:
    """A written report: where, how big (bytes) and how long building it took (seconds)."""

    path: Path
    size_bytes: int
    build_seconds: float
    groups: int
    rollouts: int


def write_html_report(
    results_path: str | Path, output: str | Path | None = None, *, tokens: bool = False
) -> HtmlReport:
    """Build the HTML report of ``results_path`` and write it to ``output``.

    Each assistant message written by a call that recorded exact tokens shows its token
    count and mean logprob; ``tokens`` also embeds the ids and logprobs, shown per turn
    (about 15 KB of page per 1,000 tokens).

    ``output`` defaults to the results file with suffix ``.html``. A file still being
    written (or interrupted) shows its complete groups. The page is written to a temporary
    file and moved into place, so a failed write (a full disk) leaves no truncated page.
    Raises ``ResultsFileError`` for a file that is not a results file and ``OSError`` when
    reading or writing fails.
    """
    started = time.perf_counter()
    source = Path(results_path)
    results = read_results(source)
    page = render_html_report(results, source=str(source), tokens=tokens)
    target = Path(output) if output is not None else source.with_suffix(".html")
    data = page.encode("utf-8", "backslashreplace")  # a lone surrogate outside the data
    replace_file(target, data)  # a full disk leaves the old page (or none), never half of one
    return HtmlReport(
        path=target,
        size_bytes=len(data),
        build_seconds=time.perf_counter() - started,
        groups=len({r.example_index for r in results.rollouts}),
        rollouts=len(results.rollouts),
    )


def report_data(
    results: Results, *, source: str | None = None, tokens: bool = False
) -> dict[str, Any]:
    """The data the page embeds: header, summary, reward keys, reasons and every group.

    Compact on purpose: a rollout's rewards are a list in ``keys`` order, its termination
    reason an index into ``reasons``, and the messages every rollout of a group starts with
    (the prompt) are stored once per group as ``prompt``.
    """
    groups = groups_of(results)
    keys = reward_keys_of(results)
    reasons = list(Counter(r.termination_reason for r in results.rollouts))
    reason_index = {reason: i for i, reason in enumerate(reasons)}
    weights = _weights(results.header.get("reward_weights"))
    return {
        "format": DATA_FORMAT,
        "source": source,
        "header": dict(results.header),
        "summary": _summary(groups, weights),
        "keys": keys,
        "reasons": reasons,
        "groups": [_group_data(group, keys, reason_index, tokens, weights) for group in groups],
    }


def _weights(value: object) -> dict[str, float] | None:
    """The header's ``reward_weights`` when they are a mapping of numbers (else the sum)."""
    if not isinstance(value, Mapping):
        return None
    weights = {str(k): v for k, v in value.items()}
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in weights.values())
    return {k: float(v) for k, v in weights.items()} if numbers else None


def _summary(groups: Sequence[ResultGroup], weights: Mapping[str, float] | None) -> dict[str, Any]:
    """The run's summary as ``summarize`` computes it (the numbers of ``.report.json``)."""
    report = _run_report(groups, weights)
    data = report.to_dict()
    return {
        "scored_reward_stats": data["scored_reward_stats"],
        "failed_share": report.failed_share,
        "scalar_stats": data["scalar_stats"],
        "scored_scalar_stats": data["scored_scalar_stats"],
        "reward_weights": data["reward_weights"],
        "advantage_signal_share": report.advantage_signal_share,
        "mean_abs_advantage": report.mean_abs_advantage,
        "examples": len(groups),
        "groups": report.groups,
        "rollouts": report.rollouts,
        "rollouts_by_reason": data["rollouts_by_reason"],
        "groups_by_reason": data["groups_by_reason"],
        "reward_stats": data["reward_stats"],
        "no_variance_group_share": report.no_variance_group_share,
        "no_variance_groups": sum(_is_flat(group) for group in groups),
        "pass_at_k": data["pass_at_k"],
        "usage": _usage_summary(report.usage),
    }


def _run_report(groups: Sequence[ResultGroup], weights: Mapping[str, float] | None) -> RunReport:
    return summarize(
        run_id="",
        results_path=None,
        examples=len(groups),
        groups=[completed_group(group.example_index, group.rollouts) for group in groups],
        groups_resumed=0,
        rollouts_run=0,
        wall_seconds=0.0,
        reward_weights=weights,
    )


def _is_flat(group: ResultGroup) -> bool:
    first = group.rollouts[0].rewards
    return all(r.rewards == first for r in group.rollouts[1:])


def _usage_summary(usage: UsageStats | None) -> dict[str, Any] | None:
    """Token totals, and their mean over the rollouts that recorded usage (``None``:
    none did), from the report's ``UsageStats``."""
    if usage is None:
        return None
    totals = {key: total for key in TOKEN_USAGE_KEYS if (total := getattr(usage, key)) is not None}
    return {
        "rollouts_with_usage": usage.rollouts,
        "totals": totals,
        "mean_per_rollout": {key: total / usage.rollouts for key, total in totals.items()},
    }


def _group_data(
    group: ResultGroup,
    keys: Sequence[str],
    reason_index: Mapping[str, int],
    tokens: bool = False,
    weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    transcripts = [r.messages for r in group.rollouts]
    prompt = _shared_prefix([t for t in transcripts if t is not None])
    if any(t is None for t in transcripts):
        prompt = []
    scalars = [scalar_of(record.rewards, weights) for record in group.rollouts]
    advantages = group_signal(scalars, [record.termination_reason for record in group.rollouts])
    rollouts = []
    for record, scalar, advantage in zip(group.rollouts, scalars, advantages, strict=True):
        rollout = _rollout_data(record, len(prompt), keys, reason_index, tokens)
        rollout["s"], rollout["v"] = scalar, advantage  # weighted scalar reward, GRPO advantage
        rollouts.append(rollout)
    data: dict[str, Any] = {
        "i": group.example_index,
        "id": group.example_id,
        "f": _is_flat(group),
        "p": prompt,
        "r": rollouts,
    }
    step = group.rollouts[0].step
    if step is not None:  # a training run's group: the page filters by step
        data["s"] = step
    return data


def _rollout_data(
    record: Trajectory,
    prompt_length: int,
    keys: Sequence[str],
    reason_index: Mapping[str, int],
    tokens: bool = False,
) -> dict[str, Any]:
    """The page's compact form of one rollout, derived from its record here and only here:
    rewards as a list in ``keys`` order, the reason as an index into the page's reasons, the
    transcript without the group's shared ``prompt_length`` leading messages and, when
    calls recorded tokens, ``k``: per shown message index, ``[token count, mean logprob]``
    of the call that wrote it (plus its ids and logprobs with ``tokens``); ``an``: the
    rollout's annotations, when it has any (judge explanations among them)."""
    messages = record.messages
    data = {
        "g": record.group_index,
        "id": record.rollout_id,
        "a": record.attempt,
        "t": reason_index[record.termination_reason],
        "w": [record.rewards.get(key) for key in keys],
        "tm": dict(record.timings),
        "u": None if record.usage is None else dict(record.usage),
        "m": None if messages is None else list(messages[prompt_length:]),
        "l": list(record.logs),
    }
    turns = _turn_tokens(record, prompt_length, tokens)
    if turns:
        data["k"] = turns
    if record.annotations:
        data["an"] = dict(record.annotations)
    return data


def _turn_tokens(record: Trajectory, prompt_length: int, tokens: bool) -> dict[str, list[Any]]:
    turns: dict[str, list[Any]] = {}
    for call in record.model_calls:
        ids, logprobs, index = (
            call.completion_token_ids,
            call.completion_logprobs,
            call.message_index,
        )
        if ids is None or index is None or index < prompt_length:
            continue
        mean = round(math.fsum(logprobs) / len(logprobs), 4) if logprobs else None
        turn: list[Any] = [len(ids), mean]
        if tokens:
            turn += [list(ids), None if logprobs is None else list(logprobs)]
        turns[str(index - prompt_length)] = turn
    return turns


def _shared_prefix(transcripts: Sequence[Sequence[Any]]) -> list[Any]:
    """The prompt every transcript starts with: the common leading messages before the
    first assistant message."""
    if not transcripts:
        return []
    prefix: list[Any] = []
    for messages in zip(*transcripts, strict=False):
        first = messages[0]
        if not isinstance(first, Mapping) or first.get("role") == "assistant":
            break
        if any(message != first for message in messages[1:]):
            break
        prefix.append(first)
    return prefix


# Outside JSON syntax, so in the dumped text they occur only inside string literals.
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def embedded_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: no ``<`` (so no ``</script>``
    or ``<!--``), no raw U+2028/U+2029 line separators and no lone surrogates (UTF-8 has
    no form for them; they are written as the JSON escape ``\\ud800``). Bidirectional
    formatting characters (``U+202E`` and kin, which would reorder the text around them on
    the page, "Trojan Source") become the visible text ``\\u202e``, as ``show`` prints them."""
    try:
        text = json.dumps(
            data, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
        )
    except ValueError:  # NaN or an infinity somewhere: JSON.parse would refuse the page
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), default=str)
    text = _BIDI_CONTROLS.sub(lambda match: f"\\\\u{ord(match.group()):04x}", text)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
        .encode("utf-8", "backslashreplace")  # lone surrogates as JSON's own \\udXXX
        .decode("utf-8")
    )


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
    data = report_data(results, source=source, tokens=tokens)
    header = data["header"]
    title = title or f"benchmax run {header.get('run_id', '')}"
    body = "\n".join(
        [
            before,
            _definition_section(header, source),
            _summary_section(data["summary"], data["keys"]),
            charts_section(data),
        ]
    )
    template = resources.files("benchmax.runner").joinpath("_html_report_page.html")
    page = template.read_text(encoding="utf-8")
    values = {"TITLE": _e(title), "STATIC": body, "DATA": embedded_json(data)}
    # One pass, so a placeholder-like string inside the inserted text stays as it is.
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], page)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by its text (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``, as JavaScript writes them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _number(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "\u2013"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def _stat_cell(value: float | int | None, testid: str, digits: int = 3) -> str:
    raw = "" if value is None else repr(value)
    return (
        f'<td class="num" data-testid="{_e(testid)}" data-value="{_e(raw)}">'
        f"{_e(_number(value, digits))}</td>"
    )


def _definition_section(header: Mapping[str, Any], source: str | None) -> str:
    definition = header.get("definition") or {}
    env = definition.get("env") or {}
    rows: list[tuple[str, Any]] = [("results file", source or "")]
    rows.append(("run id", header.get("run_id", "")))
    rows.append(("created", header.get("created_at", "")))
    rows.append(("benchmax", header.get("benchmax_version", "")))
    if isinstance(env, Mapping):
        for name, value in env.items():
            rows.append((f"env {name}", value))
    else:  # a hand-edited header: shown as it is
        rows.append(("env", env))
    for name, value in definition.items():
        if name != "env":
            rows.append((name.replace("_", " "), value))
    if "rescored_from" in header:
        rows.append(("rescored from", header["rescored_from"]))
    if header.get("previous_definitions"):
        rows.append(("previous definitions", header["previous_definitions"]))
    half = (len(rows) + 1) // 2
    tables = "".join(
        '<table class="kv">'
        + "".join(
            f"<tr><th>{_e(name)}</th><td><code>{_e(_plain(value))}</code></td></tr>"
            for name, value in part
        )
        + "</table>"
        for part in (rows[:half], rows[half:])
    )
    return (
        '<section id="run" class="card"><h2>Run</h2>'
        f'<div class="kv-grid" data-testid="definition">{tables}</div></section>'
    )


def _signal_note(summary: Mapping[str, Any]) -> str:
    """How the weighted scalar is made, and what the advantages give."""
    if summary["scalar_stats"] is None:
        return ""
    weights = summary["reward_weights"]
    how = (
        "the sum of the rewards"
        if not weights
        else " + ".join(f"{weight:g} * {key}" for key, weight in weights.items())
    )
    return (
        f'<p class="muted" data-testid="signal">reward (weighted) = {_e(how)}; each rollout '
        "shows it with its GRPO advantage over its group's scored rollouts (what a trainer "
        f"learns from); mean |advantage| {summary['mean_abs_advantage']:.3f}.</p>"
    )


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _summary_section(summary: Mapping[str, Any], keys: Sequence[str]) -> str:
    share = summary["no_variance_group_share"]
    tiles: list[tuple[str, str, Any, str]] = [  # label, shown, data-value, test id
        ("examples", _number(summary["examples"]), summary["examples"], "examples"),
        ("rollouts", _number(summary["rollouts"]), summary["rollouts"], "rollouts"),
        (
            "not scored (operational failures)",
            f"{summary['failed_share']:.0%}",
            summary["failed_share"],
            "failed-share",
        ),
        (
            "groups with no reward variance",
            f"{summary['no_variance_groups']} ({share:.0%})",
            share,
            "no-variance",
        ),
        (
            "groups with a learning signal (GRPO)",
            f"{summary['advantage_signal_share']:.0%}",
            summary["advantage_signal_share"],
            "signal-share",
        ),
    ]
    tile_html = "".join(
        f'<div class="tile"><div class="tile-value" data-testid="{testid}"'
        f' data-value="{_e(raw)}">{_e(shown)}</div>'
        f'<div class="tile-label">{_e(label)}</div></div>'
        for label, shown, raw, testid in tiles
    )
    reasons = "".join(
        f'<tr data-reason="{_e(reason)}"><td><span class="chip {reason_class(reason)}">'
        f"{_e(reason)}</span></td>"
        + _stat_cell(count, f"rollouts-{reason}")
        + _stat_cell(summary["groups_by_reason"].get(reason, 0), f"groups-{reason}")
        + "</tr>"
        for reason, count in summary["rollouts_by_reason"].items()
    )
    reward_rows = []
    rows = [
        (key, summary["reward_stats"].get(key), summary["scored_reward_stats"].get(key))
        for key in keys
    ]
    if summary["scalar_stats"] is not None and len(keys) > 1:
        rows.append(("(weighted)", summary["scalar_stats"], summary["scored_scalar_stats"]))
    for key, stats, scored in rows:
        if stats is None:
            continue
        passes = summary["pass_at_k"].get(key)
        cells = _stat_cell(stats["mean"], f"mean-{key}")
        cells += _stat_cell(None if scored is None else scored["mean"], f"scored-mean-{key}")
        cells += "".join(_stat_cell(stats[name], f"{name}-{key}") for name in ("std", "min", "max"))
        if passes is None:
            cells += '<td class="num muted" colspan="3">not binary</td>'
        else:
            cells += _stat_cell(passes["pass_at_1"], f"pass1-{key}")
            cells += (
                f'<td class="num" data-testid="passk-{_e(key)}"'
                f' data-value="{passes["pass_at_k"]!r}"'
                f' title="k = {passes["k"]}">{passes["pass_at_k"]:.3f}'
                f' <span class="muted">k={passes["k"]}</span></td>'
            )
            cells += _stat_cell(passes["any_success_share"], f"anysuccess-{key}")
        reward_rows.append(f'<tr data-key="{_e(key)}"><td><code>{_e(key)}</code></td>{cells}</tr>')
    usage = summary["usage"]
    if usage is None:
        usage_html = '<p class="muted" data-testid="usage-none">No token usage recorded.</p>'
    else:
        usage_rows = "".join(
            f"<tr><td>{_e(name.replace('_', ' '))}</td>"
            + _stat_cell(total, f"usage-total-{name}")
            + _stat_cell(usage["mean_per_rollout"][name], f"usage-mean-{name}", 1)
            + "</tr>"
            for name, total in usage["totals"].items()
        )
        usage_html = (
            '<table class="grid"><thead><tr><th>tokens</th><th class="num">total</th>'
            '<th class="num">per rollout</th></tr></thead>'
            f"<tbody>{usage_rows}</tbody></table>"
            f'<p class="muted">{usage["rollouts_with_usage"]:,} of {summary["rollouts"]:,}'
            " rollouts reported usage.</p>"
        )
    return (
        '<section id="summary" class="card"><h2>Summary</h2>'
        f'<div class="tiles">{tile_html}</div>'
        '<div class="columns"><div><h3>Termination reasons</h3>'
        '<table class="grid" data-testid="reasons"><thead><tr><th>reason</th>'
        '<th class="num">rollouts</th><th class="num">groups</th></tr></thead>'
        f"<tbody>{reasons}</tbody></table></div>"
        f"<div><h3>Token usage</h3>{usage_html}</div></div>"
        "<h3>Rewards</h3>"
        '<table class="grid" data-testid="rewards"><thead><tr><th>key</th>'
        '<th class="num" title="over every rollout">mean</th>'
        '<th class="num" title="over the scored rollouts (operational failures left out)">'
        'scored mean</th><th class="num">std</th><th class="num">min</th>'
        '<th class="num">max</th><th class="num" title="mean over groups">pass@1</th>'
        '<th class="num">pass@k</th><th class="num" title="share of groups with a success">'
        "any success</th></tr></thead>"
        f"<tbody>{''.join(reward_rows)}</tbody></table>"
        '<p class="muted">pass@k (Chen et al. 2021) is shown for keys whose values are all 0 or 1;'
        " k is the smallest group size.</p>"
        f"{_signal_note(summary)}</section>"
    )


def _reason_class(reason: str) -> str:
    return "ok" if reason == FINISHED else "bad"
