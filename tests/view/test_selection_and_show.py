"""``RolloutFilter``/``select_rollouts`` and the ``show`` command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.view.synthetic import header, rollout, write

from benchmax.cli import cli
from benchmax.results import (
    ResultsFileError,
    RolloutFilter,
    iter_results,
    read_results,
    select_from_file,
    select_rollouts,
)
from benchmax.trajectory import Trajectory

TRANSCRIPT = [
    {"role": "user", "content": "Say hi"},
    {"role": "assistant", "content": "hi", "reasoning_content": "greet back"},
]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    records = [
        rollout(0, "aaaa1111", 0, rewards={"correct": 1.0, "style": 0.5}, transcript=TRANSCRIPT),
        rollout(0, "aaaa1111", 1, rewards={"correct": 0.0, "style": 0.0}, reason="model_error",
                transcript=TRANSCRIPT[:1],
                logs=[{"time": "t", "level": "ERROR", "logger": "benchmax.envs.base.env",
                       "message": "model failed", "exception": "Traceback\nTimeoutError: slow"}]),
        rollout(1, "bbbb2222", 0, rewards={"correct": 0.0, "style": 1.0}, transcript=TRANSCRIPT),
        rollout(1, "bbbb2222", 1, rewards={"correct": 1.0, "style": 0.25}, transcript=TRANSCRIPT),
    ]  # fmt: skip
    return write(tmp_path / "r.jsonl", header(group_size=2), records)


def ids(records: list) -> list[tuple[int, int]]:
    return [(r.example_index, r.group_index) for r in records]


def test_select_by_reason_example_and_reward_range(results: Path) -> None:
    loaded = read_results(results)
    assert ids(select_rollouts(loaded, RolloutFilter())) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert ids(select_rollouts(loaded, RolloutFilter(reason="model_error"))) == [(0, 1)]
    assert ids(select_rollouts(loaded, RolloutFilter(example_id="bbbb2222"))) == [(1, 0), (1, 1)]
    assert ids(select_rollouts(loaded, RolloutFilter(example_id="bbbb"))) == [(1, 0), (1, 1)]
    assert select_rollouts(loaded, RolloutFilter(example_id="bbb")) == []  # prefixes need 4
    assert ids(select_rollouts(loaded, RolloutFilter(min_reward=1))) == [(0, 0), (1, 1)]
    assert ids(select_rollouts(loaded, RolloutFilter(max_reward=0))) == [(0, 1), (1, 0)]
    in_range = RolloutFilter(key="style", min_reward=0.25, max_reward=0.5)
    assert ids(select_rollouts(loaded, in_range)) == [(0, 0), (1, 1)]
    both = RolloutFilter(reason="finished", key="style", max_reward=0.5)
    assert ids(select_rollouts(loaded, both)) == [(0, 0), (1, 1)]
    assert ids(select_rollouts(loaded, RolloutFilter(), limit=3)) == [(0, 0), (0, 1), (1, 0)]


def test_select_rejects_an_unknown_key_and_bad_limits(results: Path) -> None:
    loaded = read_results(results)
    with pytest.raises(ValueError, match=r"reward key 'nope' is not in the results \(keys: "):
        select_rollouts(loaded, RolloutFilter(key="nope"))
    with pytest.raises(ValueError, match="limit"):
        select_rollouts(loaded, RolloutFilter(), limit=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reason": ""}, "reason must be a non-empty string"),
        ({"example_id": ""}, "example_id must be a non-empty string"),
        ({"key": ""}, "key must be a non-empty string"),
        ({"min_reward": math.nan}, "min_reward must be a finite number"),
        ({"max_reward": math.inf}, "max_reward must be a finite number"),
        ({"min_reward": True}, "min_reward must be a finite number"),
        ({"max_reward": "1"}, "max_reward must be a finite number"),
        ({"min_reward": 1, "max_reward": 0}, "min_reward 1 is greater than max_reward 0"),
    ],
)
def test_filter_validation(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RolloutFilter(**options)


def show(*args: object) -> str:
    result = CliRunner().invoke(cli, ["show", *map(str, args)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    return result.output


def test_show_prints_the_selection_with_transcripts_and_logs(results: Path) -> None:
    out = show(results, "--reason", "model_error")
    assert "example 0" in out and "rollout 1" in out and "model_error" in out
    assert "Say hi" in out and "TimeoutError: slow" in out and "model failed" in out
    assert "showed 1 of 1 matching rollouts" in out
    out = show(results, "--example", "bbbb", "--key", "style", "--min-reward", "0.5")
    assert "example 1" in out and "rollout 0" in out and "rollout 1" not in out
    assert "[reasoning] greet back" in out
    out = show(results, "--limit", "1")
    assert "showed 1 of 4 matching rollouts (--limit to see more)" in out
    out = show(results, "--reason", "tool_error")
    assert "no rollout matches" in out and "reasons: finished, model_error" in out
    assert "prefix" not in out
    out = show(results, "--example", "bbb")
    assert "no rollout matches" in out and "an --example prefix needs at least 4 characters" in out


def test_show_keeps_every_reward_whole_on_an_80_column_terminal(tmp_path: Path) -> None:
    rewards = {
        "rubric_correctness_of_the_final_answer_given": -1234.5678,
        "rubric_fabrication_of_sources_and_quotations": 0.875,
        "x": 12345.25,
    }
    path = write(
        tmp_path / "w.jsonl",
        header(group_size=1),
        [rollout(0, "example-with-a-long-id-0123456789", 0, rewards=rewards)],
    )
    result = CliRunner().invoke(cli, ["show", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    for key, value in rewards.items():
        assert f"{key}={value:g}" in out, out
    assert "group 1.500 s" in out


def test_show_escapes_control_characters(tmp_path: Path) -> None:
    hostile = "\x1b[31mred\x1b[0m \u202eevil\u2028next \x07bell [bold]markup[/bold]"
    transcript = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": hostile, "tool_calls": [
            {"id": "c", "type": "function",
             "function": {"name": "f\x1b[2J", "arguments": '{"x": "\\u001b[2J"}'}}]},
    ]  # fmt: skip
    path = write(
        tmp_path / "h.jsonl",
        header(group_size=1),
        [rollout(0, "e\x1bx", 0, rewards={"ok": 1.0}, transcript=transcript)],
    )
    out = show(path)
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out and "\u2028" not in out
    assert "\\x1b[31mred\\x1b[0m \\u202eevil\\u2028next \\x07bell [bold]markup[/bold]" in out
    assert "f\\x1b[2J" in out and '{"x": "\\u001b[2J"}' in out  # JSON's own escape


def test_show_escapes_lone_surrogates(tmp_path: Path) -> None:
    transcript = [{"role": "assistant", "content": "lone \ud800 surrogate"}]
    path = tmp_path / "s.jsonl"
    record = rollout(0, "e", 0, rewards={"ok": 1.0}, transcript=transcript)
    path.write_text(json.dumps(header(group_size=1)) + "\n" + json.dumps(record) + "\n")
    out = show(path)
    assert "lone \\ud800 surrogate" in out


def test_show_clips_long_texts_at_the_pages_limit_and_full_prints_them(tmp_path: Path) -> None:
    long = "".join(f"{n:09d}," for n in range(30_000))  # 300,000 characters, each place known
    arguments = json.dumps({"text": long})
    transcript = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": long, "reasoning_content": long, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
    ]  # fmt: skip
    logs = [{"time": "t", "level": "ERROR", "logger": "x", "message": long, "exception": long}]
    path = write(
        tmp_path / "long.jsonl",
        header(group_size=1),
        [rollout(0, "e", 0, rewards={"ok": 1.0}, transcript=transcript, logs=logs)],
    )
    joined = show(path).replace("\n", "").replace("│", "").replace(" ", "")
    marker = "…[200,000morecharacters;--fullshowseverything]"
    # content, reasoning, log message and exception: the first 100,000 characters each
    assert joined.count("000009999,") == 4  # the last item within the limit...
    assert "000010000," not in joined  # ...and not one after it
    assert joined.count(marker) == 4
    indented = len(json.dumps({"text": long}, indent=2))  # how show prints long arguments
    assert f"…[{indented - 100_000:,}morecharacters;--fullshowseverything]" in joined
    full = show(path, "--full").replace("\n", "").replace("│", "").replace(" ", "")
    assert full.count("000029999,") == 5 and "morecharacters" not in full


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--key", "nope"], "reward key 'nope' is not in the results"),
        (["--min-reward", "1", "--max-reward", "0"], "greater than --max-reward"),
        (["--limit", "0"], "0 is not in the range x>=1"),
    ],
)
def test_show_reports_bad_options_in_one_line(results: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["show", str(results), *args])
    assert result.exit_code != 0
    assert message in result.output and result.output.count("\n") == 1


def test_show_and_view_refuse_what_is_not_a_results_file(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    for command in ("show", "view"):
        result = CliRunner().invoke(cli, [command, str(other)])
        assert result.exit_code == 3 and "is not a benchmax results file" in result.output
        result = CliRunner().invoke(cli, [command, str(tmp_path / "missing.jsonl")])
        assert (
            result.exit_code == 3
            and "cannot read" in result.output
            and "No such file" in result.output
        )
        result = CliRunner().invoke(cli, [command, str(tmp_path)])
        assert result.exit_code == 3 and "Is a directory" in result.output


def test_select_from_file_streams_in_file_order_and_can_stop_early(tmp_path: Path) -> None:
    records = [
        rollout(1, "bbbb2222", 0, rewards={"correct": 1.0}),
        rollout(1, "bbbb2222", 1, rewards={"correct": 0.0}, reason="model_error"),
        rollout(0, "aaaa1111", 0, rewards={"correct": 1.0}),
        rollout(0, "aaaa1111", 1, rewards={"correct": 1.0}),
    ]
    path = write(tmp_path / "r.jsonl", header(group_size=2), records)
    found = select_from_file(path, RolloutFilter(min_reward=1.0), limit=1)
    assert ids(list(found.shown)) == [(1, 0)] and found.complete
    assert (found.matching, found.rollouts, found.reasons) == (3, 4, ("finished", "model_error"))
    quick = select_from_file(path, RolloutFilter(min_reward=1.0), limit=1, count_all=False)
    assert ids(list(quick.shown)) == [(1, 0)] and not quick.complete and quick.matching == 2
    everything = select_from_file(path, RolloutFilter(), count_all=False)
    assert len(everything.shown) == 4 and everything.complete
    with pytest.raises(ValueError, match="not in the results"):
        select_from_file(path, RolloutFilter(key="nope", min_reward=0.0), count_all=False)


def test_select_from_file_names_the_damaged_line(tmp_path: Path) -> None:
    first = rollout(0, "aaaa1111", 0, rewards={"correct": 1.0})
    path = write(tmp_path / "r.jsonl", header(group_size=1), [first])
    path.write_text(path.read_text() + '{"example_index": 1, "attempt": 1}\n')
    with pytest.raises(ResultsFileError, match=r"r\.jsonl:3 is not a rollout record"):
        select_from_file(path, RolloutFilter())
    stream = iter_results(path)
    assert not isinstance(next(stream), Trajectory)  # the header comes first
    record = next(stream)  # errors come when the stream reaches them
    assert isinstance(record, Trajectory) and record.example_id == "aaaa1111"
    with pytest.raises(ResultsFileError, match=r"r\.jsonl:3"):
        next(stream)
