"""The static HTML of the ``view`` page: the run's definition and its summary (tiles,
termination reasons, token usage, reward statistics with pass@k)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from benchmax.results._html_charts import reason_class

__all__ = ["definition_section", "summary_section"]


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


def definition_section(header: Mapping[str, Any], source: str | None) -> str:
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


def summary_section(summary: Mapping[str, Any], keys: Sequence[str]) -> str:
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
    coverage = summary.get("coverage")
    if coverage:
        sampled, trained = coverage["sampled_tokens"], coverage["trained_tokens"]
        covered = trained / sampled if sampled else 1.0
        tiles.append(
            (
                f"of {sampled:,} sampled tokens in training samples "
                f"({coverage['branched_rollouts']} rollouts with several branches)",
                f"{covered:.1%}",
                covered,
                "token-coverage",
            )
        )
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
