"""The data commands' shared core: how a workflow's failures reach the command line, the
credentials and log quiet it runs under, and its summary lines."""

from __future__ import annotations

import logging
from pathlib import Path

import click
import pytest
from rich.console import Console

from benchmax.auth import InjectedAuth, ModelRequestContext, StaticBearerAuth
from benchmax.cli._data_workflow import (
    StageProgress,
    print_skipped,
    run_workflow,
    summary_table,
    wrote_splits,
)


def _progress() -> StageProgress:
    return StageProgress(Console(quiet=True), {"reading": "bytes"})


class _BadInput(Exception):
    pass


def test_a_refused_error_is_the_commands_message(tmp_path: Path) -> None:
    async def work() -> None:
        raise _BadInput("no such log")

    with pytest.raises(click.ClickException) as raised:
        run_workflow(work, progress=_progress(), output_dir=tmp_path, refused=(_BadInput,))
    assert raised.value.message == "no such log"


def test_an_unwritable_output_names_the_directory(tmp_path: Path) -> None:
    async def work() -> None:
        raise PermissionError("permission denied")

    with pytest.raises(click.ClickException) as raised:
        run_workflow(work, progress=_progress(), output_dir=tmp_path, refused=(_BadInput,))
    assert raised.value.message == f"cannot write to {tmp_path}: permission denied"


def test_any_other_error_is_not_turned_into_a_message(tmp_path: Path) -> None:
    async def work() -> None:
        raise RuntimeError("a defect")

    with pytest.raises(RuntimeError, match="a defect"):
        run_workflow(work, progress=_progress(), output_dir=tmp_path, refused=(_BadInput,))


def test_credentials_are_bound_while_the_work_runs_and_logs_kept_quiet(tmp_path: Path) -> None:
    key = StaticBearerAuth("teacher-key")
    seen: list[object] = []

    async def work() -> str:
        context = ModelRequestContext(base_url="http://teacher/v1", model="t", rollout_id="r")
        seen.append(dict(await InjectedAuth("teacher").headers_for_request(context)))
        seen.append(len(logging.getLogger().handlers))
        return "done"

    handlers = len(logging.getLogger().handlers)
    result = run_workflow(
        work,
        progress=_progress(),
        output_dir=tmp_path,
        refused=(),
        credentials={"teacher": key},
        quiet_logs=True,
    )
    assert result == "done"
    assert seen == [{"Authorization": "Bearer teacher-key"}, handlers + 1]
    assert len(logging.getLogger().handlers) == handlers  # the quiet handler is gone again


def test_the_summary_lines(capsys: pytest.CaptureFixture[str]) -> None:
    console = Console(force_terminal=False, width=200)
    print_skipped(console, ["a.jsonl:3 [not json]"], 4)
    console.print(wrote_splits(Path("out/train.jsonl"), Path("out/eval.jsonl")))
    console.print(summary_table("traces summary", [("records [read]", 7)]))
    text = capsys.readouterr().out
    assert "skipped a.jsonl:3 [not json]" in text
    assert "... and 3 more" in text
    assert "wrote out/train.jsonl and out/eval.jsonl" in text
    assert "records [read]" in text and "7" in text


def test_a_stage_counts_in_its_unit() -> None:
    progress = _progress()
    progress("reading", 10, 100)
    progress("writing", 2, 3)
    units = {task.description: task.fields["unit"] for task in progress.bars.tasks}
    assert units == {"reading": "bytes", "writing": "rows"}
