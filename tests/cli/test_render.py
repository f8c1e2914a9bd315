"""The summary tables print names and paths literally (no rich markup surprises)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from benchmax.cli._render import render_report
from benchmax.results import PassAtK, RewardStats
from benchmax.runner import RunReport


def test_report_names_and_paths_are_printed_literally() -> None:
    report = RunReport(
        run_id="r",
        results_path=Path("runs/[draft]/out.jsonl"),
        examples=2,
        groups=2,
        groups_resumed=1,
        rollouts=4,
        rollouts_by_reason={"finished": 4},
        groups_by_reason={"finished": 2},
        reward_stats={"score[bold]": RewardStats(mean=0.5, std=0.5, min=0.0, max=1.0)},
        no_variance_group_share=0.5,
        rollouts_run=2,
        rollouts_per_second=4.0,
        wall_seconds=0.5,
    )
    sink = io.StringIO()
    render_report(report, Console(file=sink, width=200))
    text = sink.getvalue()
    assert "score[bold]" in text
    assert "results: runs/[draft]/out.jsonl" in text
    assert "report:  runs/[draft]/out.report.json" in text
    assert "groups: 2 of 2 examples (1 resumed); groups with no reward variance: 50%" in text
    assert "ran 2 rollouts in 0.5 s (4.0 rollouts/s)" in text


def test_long_reward_keys_are_wrapped_whole_on_an_80_column_terminal() -> None:
    keys = ["rubric_correctness", "rubric_fabrication_of_sources"]
    report = RunReport(
        run_id="r",
        results_path=Path("runs/out.jsonl"),
        examples=1,
        groups=1,
        groups_resumed=0,
        rollouts=4,
        rollouts_by_reason={"finished": 4},
        groups_by_reason={"finished": 1},
        reward_stats={key: RewardStats(mean=0.5, std=0.5, min=0.0, max=1.0) for key in keys},
        no_variance_group_share=0.0,
        rollouts_run=4,
        rollouts_per_second=4.0,
        wall_seconds=1.0,
        pass_at_k={
            key: PassAtK(k=4, pass_at_1=0.5, pass_at_k=1.0, any_success_share=1.0) for key in keys
        },
    )
    sink = io.StringIO()
    render_report(report, Console(file=sink, width=80))
    text = sink.getvalue()
    assert "…" not in text
    cells = "".join(
        line.split("│")[1].strip()
        for line in text.splitlines()
        if line.startswith("│ rubric")
        or (line.startswith("│") and line.split("│")[2].strip() == "")
    )
    for key in keys:
        assert key in cells
