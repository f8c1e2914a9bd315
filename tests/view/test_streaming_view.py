"""``view`` reads the results file as a stream: the page it writes equals the page built from
the whole file, transcripts beyond the budget are left out (with the command that prints
them), and memory does not grow with the transcripts."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.view.synthetic import header, large_run, mixed_run, rollout, write

from benchmax.cli import cli
from benchmax.results import ResultsFileError, read_results, render_html_report, write_html_report

DATA = re.compile(r'<script type="application/json" id="benchmax-data">(.*?)</script>', re.S)


def whole_file_page(path: Path, *, tokens: bool = False) -> bytes:
    page = render_html_report(read_results(path), source=str(path), tokens=tokens)
    return page.encode("utf-8", "backslashreplace")


def embedded(path: Path) -> dict:
    match = DATA.search(path.read_text(encoding="utf-8"))
    assert match is not None
    return json.loads(match.group(1))


def test_streaming_equals_the_whole_file_page_on_a_resumed_interleaved_file(
    tmp_path: Path,
) -> None:
    results = mixed_run(tmp_path / "mixed.jsonl")
    report = write_html_report(results, tmp_path / "mixed.html")
    assert report.path.read_bytes() == whole_file_page(results)
    assert report.size_bytes == report.path.stat().st_size
    data = embedded(report.path)
    # examples 0-4 have a complete group (5 was cut short); 1 and 3 show attempt 2, and 4
    # attempt 1 (its attempt 2 has a line too many)
    assert [(g["i"], g["id"], g["r"][0]["a"]) for g in data["groups"]] == [
        (0, "ex0", 1),
        (1, "ex1", 2),
        (2, "ex2", 1),
        (3, "ex3", 2),
        (4, "ex4", 1),
    ]
    assert (report.groups, report.rollouts, report.omitted_groups) == (5, 15, 0)
    assert "omitted" not in data


def test_streaming_equals_the_whole_file_page_on_generated_and_example_runs(
    tmp_path: Path, example_runs: dict[str, Path]
) -> None:
    large = large_run(tmp_path / "large.jsonl", groups=150)
    for results in (large, *example_runs.values()):
        for tokens in (False, True):
            page = tmp_path / f"{results.stem}.{tokens}.html"
            write_html_report(results, page, tokens=tokens)
            assert page.read_bytes() == whole_file_page(results, tokens=tokens), results.name


def test_groups_beyond_the_transcript_budget_show_the_command_not_the_transcript(
    tmp_path: Path,
) -> None:
    results = mixed_run(tmp_path / "mixed.jsonl")
    whole = embedded(write_html_report(results, tmp_path / "whole.html").path)
    # ex2 and ex0 complete first in the file: a budget that fits about one group keeps the
    # transcripts of the group read first only
    report = write_html_report(results, tmp_path / "cut.html", transcript_budget=1500)
    data = embedded(report.path)
    kept = [g["id"] for g in data["groups"] if "x" not in g]
    assert kept == ["ex2"]
    assert report.omitted_groups == 4
    assert data["omitted"] == {"groups": 4, "budget_bytes": 1500}
    for group, full in zip(data["groups"], whole["groups"], strict=True):
        if group["id"] == "ex2":
            assert group == full
            continue
        assert group["x"] is True and group["p"] == []
        for rollout_data, full_rollout in zip(group["r"], full["r"], strict=True):
            assert not {"m", "l", "k", "an"} & set(rollout_data)
            light = {k: v for k, v in full_rollout.items() if k not in ("m", "l", "k", "an")}
            assert rollout_data == light  # rewards, reasons, timings, usage, scalar, advantage
    assert data["summary"] == whole["summary"]
    page = report.path.read_text(encoding="utf-8")
    assert "answer 0.1" not in page and "answer 2.1" in page

    nothing = embedded(write_html_report(results, tmp_path / "none.html", transcript_budget=0).path)
    assert all(g.get("x") for g in nothing["groups"])


def test_a_damaged_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "damaged.jsonl"
    records = [rollout(0, "ex0", k, rewards={"correct": 1.0}) for k in range(2)]
    write(path, header(group_size=2), records)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"example_index": 1, "attempt": 1, "rewards": "oops"}\n')
    with pytest.raises(ResultsFileError, match=re.escape(f"{path}:4 is not a rollout record")):
        write_html_report(path, tmp_path / "page.html")
    assert not (tmp_path / "page.html").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["damaged.jsonl"]  # no spool left behind
    result = CliRunner().invoke(cli, ["view", str(path), "-o", str(tmp_path / "page.html")])
    assert result.exit_code == 3
    assert f"{path}:4 is not a rollout record" in result.output


def test_memory_holds_the_summary_not_the_transcripts(tmp_path: Path) -> None:
    """2,000 rollouts of 4 KB of transcript each (8 MB of JSON Lines): with transcripts
    left out of the page, the largest heap is a small fraction of the file."""
    text = "a long reply. " * 300
    records = (
        rollout(i, f"ex{i}", k, rewards={"correct": float(k % 2)},
                transcript=[{"role": "user", "content": f"q{i}"},
                            {"role": "assistant", "content": text}])
        for i in range(500)
        for k in range(4)
    )  # fmt: skip
    results = write(tmp_path / "big.jsonl", header(group_size=4), records)
    size = results.stat().st_size
    assert size > 8_000_000
    tracemalloc.start()
    try:
        report = write_html_report(results, tmp_path / "big.html", transcript_budget=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.rollouts == 2000 and report.omitted_groups == 500
    assert peak < size / 4, (peak, size)


def test_view_says_how_many_groups_lost_their_transcripts(tmp_path: Path) -> None:
    results = mixed_run(tmp_path / "mixed run.jsonl")
    result = CliRunner().invoke(cli, ["view", str(results), "--transcript-budget", "0"])
    assert result.exit_code == 0, result.output
    assert "5 groups, 15 rollouts" in result.output
    assert "transcripts of 5 groups read after the page's transcript budget" in result.output
    assert f"benchmax show '{results}' --example ID" in result.output
    whole = CliRunner().invoke(cli, ["view", str(results), "-o", str(tmp_path / "all.html")])
    assert whole.exit_code == 0 and "transcript budget" not in whole.output  # 64 MB fits
    refused = CliRunner().invoke(cli, ["view", str(results), "--transcript-budget", "-1"])
    assert refused.exit_code == 2 and "--transcript-budget" in refused.output


def test_the_pages_summary_is_the_runs_report(tmp_path: Path) -> None:
    """The page counts each group with the scalars and advantages its entry carries; the
    run's report computes them: the numbers agree."""
    from benchmax.results import report_data
    from benchmax.results._report import summarize
    from benchmax.results._selection import groups_of

    results = read_results(mixed_run(tmp_path / "mixed.jsonl"))
    groups = groups_of(results)
    report = summarize(
        run_id="",
        results_path=None,
        examples=len(groups),
        groups=groups,
        groups_resumed=0,
        rollouts_run=0,
        wall_seconds=0.0,
        reward_weights={"correct": 1.0, "format": 0.5},
    ).to_dict()
    summary = report_data(results)["summary"]
    for name in ("scalar_stats", "scored_scalar_stats", "reward_stats", "scored_reward_stats"):
        assert json.dumps(summary[name]) == json.dumps(report[name]), name
    for name in ("advantage_signal_share", "mean_abs_advantage", "failed_share"):
        assert summary[name] == report[name], name


@pytest.mark.parametrize("budget", ["nan", "inf", "1e400", "-1"])
def test_a_transcript_budget_that_is_not_a_finite_size_is_one_usage_line(
    tmp_path: Path, budget: str
) -> None:
    results = write(tmp_path / "run.jsonl", header(), [rollout(0, "e0", 0, rewards={"c": 1.0})])
    result = CliRunner().invoke(cli, ["view", str(results), "--transcript-budget", budget])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--transcript-budget'" in result.output
    assert isinstance(result.exception, SystemExit)  # a usage error, not a traceback
