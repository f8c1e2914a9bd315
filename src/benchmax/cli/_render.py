"""Rich rendering of run reports, progress and bundle facts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from benchmax._tracebacks import failure_summary
from benchmax.cli._safe_text import terminal_safe
from benchmax.envs.shared_types import FINISHED
from benchmax.results import CoverageStats, RewardStats, read_results
from benchmax.runner import Progress as RunProgress
from benchmax.runner import RunReport
from benchmax.trajectory import LogEntry

__all__ = ["failure_examples", "progress_bar", "render_report"]

_MAX_WHY = 240


def progress_bar(console: Console) -> tuple[Progress, Callable[[RunProgress], None]]:
    """A progress bar (examples done, rollouts/s, running mean of the first reward key)."""
    bar = Progress(
        TextColumn("[bold]running"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("examples"),
        TextColumn("{task.fields[rate]}", markup=False),
        TextColumn("{task.fields[mean]}", markup=False),
        TimeElapsedColumn(),
        console=console,
    )
    task: list[TaskID] = []

    def update(progress: RunProgress) -> None:
        fields: dict[str, Any] = {
            "rate": f"{progress.rollouts_per_second:.1f} rollouts/s",
            "mean": (
                f"mean {terminal_safe(progress.first_reward_key or '', keep_newlines=False)} "
                f"{progress.first_reward_mean:.3f}"
                if progress.first_reward_mean is not None
                else ""
            ),
        }
        if not task:
            task.append(bar.add_task("run", total=progress.examples_total, **fields))
        bar.update(
            task[0], completed=progress.examples_done, total=progress.examples_total, **fields
        )

    return bar, update


def failure_examples(report: RunReport) -> dict[str, tuple[str, str]]:
    """For each termination reason other than ``finished``: one rollout id and why it ended
    (the `Type: message` line of the exception logged as it ended, else of its first logged
    exception, else its first warning), read back from
    the results file."""
    wanted = set(report.rollouts_by_reason) - {FINISHED}
    if not wanted or report.results_path is None:
        return {}
    found: dict[str, tuple[str, str]] = {}
    for record in read_results(report.results_path).rollouts:
        reason = record.termination_reason
        if reason in wanted and reason not in found:
            found[reason] = (record.rollout_id, _why(record.logs))
    return found


def _why(logs: Sequence[LogEntry]) -> str:
    """The exception behind the rollout's end (the one logged with its termination reason,
    else the first logged), as its ``Type: message`` line; else the first warning."""
    logged = [entry for entry in logs if entry.get("exception")]
    settling = [entry for entry in logged if "termination_reason=" in entry.get("message", "")]
    chosen = (settling or logged)[:1]
    if chosen:
        why = failure_summary(str(chosen[0]["exception"]))
    else:
        warnings = [entry["message"] for entry in logs if entry.get("level") != "INFO"]
        why = warnings[0] if warnings else "(nothing was logged)"
    why = terminal_safe(why, keep_newlines=False)
    return why if len(why) <= _MAX_WHY else why[: _MAX_WHY - 3] + "..."


def _shown(name: str) -> str:
    """A name the environment chose (reason, reward key), safe for rich and the terminal."""
    return escape(terminal_safe(name, keep_newlines=False))


def render_report(report: RunReport, console: Console) -> None:
    """Print the report as tables: termination reasons, reward statistics, throughput."""
    reasons = Table(title="termination reasons", title_justify="left")
    reasons.add_column("reason")
    reasons.add_column("rollouts", justify="right")
    reasons.add_column("groups", justify="right")
    for reason, count in report.rollouts_by_reason.items():
        style = "green" if reason == FINISHED else "yellow"
        reasons.add_row(
            f"[{style}]{_shown(reason)}[/]",
            str(count),
            str(report.groups_by_reason.get(reason, 0)),
        )
    console.print(reasons)
    for reason, (rollout_id, why) in failure_examples(report).items():
        console.print(
            f"  [yellow]{_shown(reason)}[/], e.g. rollout {_shown(rollout_id)}: {escape(why)}",
            soft_wrap=True,
        )

    console.print(_rewards_table(report))
    if report.failed_share:
        console.print(
            f"[yellow]not scored[/] (operational failures, zero rewards): "
            f"{report.failed_share:.0%} of rollouts; 'scored mean' leaves them out",
            soft_wrap=True,
        )
    if report.scalar_stats is not None:
        console.print(_signal_line(report), soft_wrap=True)

    console.print(
        f"groups: {report.groups} of {report.examples} examples"
        + (f" ({report.groups_resumed} resumed)" if report.groups_resumed else "")
        + f"; groups with no reward variance: {report.no_variance_group_share:.0%}"
    )
    console.print(_tokens_line(report), soft_wrap=True)
    if report.coverage is not None:
        console.print(_coverage_line(report.coverage), soft_wrap=True)
    console.print(
        f"ran {report.rollouts_run} rollouts in {report.wall_seconds:.1f} s "
        f"({report.rollouts_per_second:.1f} rollouts/s)"
    )
    if report.results_path is not None:
        console.print(f"results: {escape(str(report.results_path))}", soft_wrap=True)
        console.print(f"report:  {escape(str(report.report_path))}", soft_wrap=True)


def _signal_line(report: RunReport) -> str:
    """What a trainer would get: the groups whose advantages carry a signal."""
    weights = report.reward_weights
    how = (
        "sum of the rewards"
        if weights is None
        else " + ".join(f"{weight:g}*{_shown(key)}" for key, weight in weights.items())
    )
    return (
        f"reward (weighted) = {how}; group advantages (GRPO, scored rollouts): "
        f"{report.advantage_signal_share:.0%} of groups give a learning signal, "
        f"mean |advantage| {report.mean_abs_advantage:.3f}"
    )


def _rewards_table(report: RunReport) -> Table:
    """Per reward key (and the weighted scalar): mean over every rollout, mean over the
    scored ones (when some were not), std, min, max, and for 0/1 keys pass@1, pass@k and
    the share of groups with at least one success."""
    rewards = Table(title="rewards", title_justify="left")
    ks = sorted({metrics.k for metrics in report.pass_at_k.values()})
    pass_k = f"pass@{ks[0]}" if len(ks) == 1 else "pass@k"
    # The scored mean differs from the mean only when some rollouts were not scored.
    split = report.failed_share > 0
    columns = (
        ["key", "mean", "scored mean", "std", "min", "max"]
        if split
        else ["key", "mean", "std", "min", "max"]
    )
    if report.pass_at_k:
        columns += ["pass@1", pass_k, "groups solved"]
    for column in columns:
        if column == "key":  # a long name on a narrow terminal wraps, never loses its end
            rewards.add_column(column, overflow="fold")
        else:
            rewards.add_column(column, justify="right")
    rows: list[tuple[str, str, RewardStats, RewardStats | None]] = [
        (key, _shown(key), stats, report.scored_reward_stats.get(key))
        for key, stats in report.reward_stats.items()
    ]
    if report.scalar_stats is not None and len(rows) > 1:  # one key: the scalar is that key
        rows.append(("", "[bold](weighted)[/]", report.scalar_stats, report.scored_scalar_stats))
    for key, label, stats, scored in rows:
        row = [label, f"{stats.mean:.3f}"]
        if split:
            row.append("-" if scored is None else f"{scored.mean:.3f}")
        row += [f"{v:.3f}" for v in (stats.std, stats.min, stats.max)]
        if report.pass_at_k:
            metrics = report.pass_at_k.get(key)
            if metrics is None:
                row += ["", "", ""]
            else:
                row.append(f"{metrics.pass_at_1:.3f}")
                row.append(f"{metrics.pass_at_k:.3f}")
                row.append(f"{metrics.any_success_share:.0%}")
        rewards.add_row(*row)
    return rewards


def _coverage_line(coverage: CoverageStats) -> str:
    """Sampled tokens the rollouts' training samples hold, and the branches that began."""
    later = {r: n for r, n in coverage.branches_began.items() if r != "first"}
    began = ", ".join(f"{reason} {count}" for reason, count in later.items())
    branched = (
        f"; {coverage.branched_rollouts} had several branches ({began})"
        if coverage.branched_rollouts
        else ""
    )
    return (
        f"token coverage: {coverage.share:.1%} of {coverage.sampled_tokens:,} sampled tokens "
        f"in training samples ({coverage.rollouts} rollouts recorded token ids{branched})"
    )


def _tokens_line(report: RunReport) -> str:
    """Token totals and completion tokens per rollout, plus the output_exceeded share."""
    exceeded = f"ended output_exceeded: {report.output_exceeded_share:.0%} of rollouts"
    usage = report.usage
    if usage is None:
        return f"tokens: not reported by the model server; {exceeded}"
    totals = ", ".join(
        f"{name} {value:,}"
        for name, value in (
            ("prompt", usage.prompt_tokens),
            ("completion", usage.completion_tokens),
            ("total", usage.total_tokens),
            ("reasoning", usage.reasoning_tokens),
            ("cached", usage.cached_tokens),
        )
        if value is not None
    )
    per_rollout = (
        f"; completion tokens per rollout: mean {usage.completion_tokens_mean:,.1f}, "
        f"max {usage.completion_tokens_max:,}"
        if usage.completion_tokens_mean is not None and usage.completion_tokens_max is not None
        else ""
    )
    reported = "" if usage.rollouts == report.rollouts else f" ({usage.rollouts} rollouts reported)"
    return f"tokens{reported}: {totals or 'none'}{per_rollout}; {exceeded}"
