"""Damaged results lines are named by ``file:line`` and by what is wrong, the same for the
whole-file reader, the streaming readers and every command that reads a results file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.view.synthetic import header, rollout, write

from benchmax.cli import cli
from benchmax.results import ResultsFileError, compare_files, iter_results, read_results

READERS: dict[str, Callable[[Path], object]] = {
    "read_results": read_results,
    "iter_results": lambda path: list(iter_results(path)),
    "compare_files": lambda path: compare_files(path, path),
}


def _file(tmp_path: Path, damaged: bytes, *, at: int = 2) -> Path:
    """A two-example results file with ``damaged`` as its line ``at`` (1-based)."""
    path = write(
        tmp_path / "run.jsonl",
        header(group_size=2),
        [rollout(i, f"e{i}", k, rewards={"correct": 1.0}) for i in range(2) for k in range(2)],
    )
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(at - 1, damaged + b"\n")
    path.write_bytes(b"".join(lines))
    return path


CASES = {
    "not UTF-8": (b'{"x": "\xff\xfe\xfa"}', r"run\.jsonl:2 is not UTF-8 \(byte 8 of the line"),
    "an array": (b"[1, 2]", r"run\.jsonl:2 is not a rollout record: a JSON list, not an object"),
    "a second header": (
        json.dumps(header()).encode(),
        r"run\.jsonl:2 is not a rollout record: a second header line",
    ),
    "no example index": (
        b'{"type": "rollout", "attempt": 1}',
        r"run\.jsonl:2 is not a rollout record: missing field 'example_index'",
    ),
    "no attempt": (
        b'{"type": "rollout", "example_index": 0}',
        r"run\.jsonl:2 is not a rollout record: missing field 'attempt'",
    ),
    "a word for an index": (
        b'{"type": "rollout", "example_index": "zero", "attempt": 1}',
        r"run\.jsonl:2 is not a rollout record: example_index is not an integer",
    ),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_reader_names_the_line_and_what_is_wrong(
    tmp_path: Path, reader: str, case: str
) -> None:
    damaged, message = CASES[case]
    with pytest.raises(ResultsFileError, match=message):
        READERS[reader](_file(tmp_path, damaged))


@pytest.mark.parametrize("command", [["show"], ["view", "-o", "page.html"], ["compare", "@"]])
def test_each_command_says_it_in_one_line_with_status_3(tmp_path: Path, command: list[str]) -> None:
    path = _file(tmp_path, b'{"type": "rollout", "attempt": 1}')
    args = [str(path) if part == "@" else part for part in command]
    result = CliRunner().invoke(cli, [args[0], str(path), *args[1:]])
    assert result.exit_code == 3, result.output
    assert "missing field 'example_index'" in result.output
    assert "Traceback" not in result.output


def test_a_rollout_line_before_the_header_is_named_as_such(tmp_path: Path) -> None:
    path = _file(tmp_path, b"", at=1)
    lines = path.read_bytes().splitlines(keepends=True)
    lines = [lines[2], *lines[1:2], *lines[3:]]  # a rollout line first, then the header
    path.write_bytes(b"".join(lines))
    with pytest.raises(ResultsFileError, match=r"run\.jsonl:1 is a rollout record, not the"):
        read_results(path)


def _file_with(tmp_path: Path, **fields: object) -> Path:
    """A two-example results file whose first rollout line has ``fields`` set."""
    lines = [rollout(i, f"e{i}", k, rewards={"correct": 1.0}) for i in range(2) for k in range(2)]
    lines[0].update(fields)
    return write(tmp_path / "run.jsonl", header(group_size=2), lines)


TOOL_CALL_CASES = {
    "an object for the list": ({"add": 1}, r"run\.jsonl:2 .*tool_calls must be a list"),
    "a word for the list": ("add", r"run\.jsonl:2 .*tool_calls must be a list"),
    "null in the list": (
        [{"name": "add", "seconds": 0.1, "message_index": 2}, None],
        r"run\.jsonl:2 .*tool_calls\[1\]: a tool call must be a JSON object",
    ),
    "a bad name": (
        [{"name": 5, "seconds": 0.1, "message_index": 2}],
        r"run\.jsonl:2 .*tool_calls\[0\]: ",
    ),
}


@pytest.mark.parametrize("case", sorted(TOOL_CALL_CASES))
def test_damaged_tool_calls_are_named_with_their_index(tmp_path: Path, case: str) -> None:
    value, message = TOOL_CALL_CASES[case]
    with pytest.raises(ResultsFileError, match=message):
        read_results(_file_with(tmp_path, tool_calls=value))


@pytest.mark.parametrize(
    "coverage",
    [
        "garbage",
        {"sampled_tokens": -5, "trained_tokens": 10**30, "branches": [{"began": "x"}]},
        {"sampled_tokens": 3, "trained_tokens": 9, "branches": "no"},
    ],
)
def test_a_hand_edited_coverage_record_is_ignored_for_the_one_model_calls_give(
    tmp_path: Path, coverage: object
) -> None:
    calls = [
        {"finish_reason": "stop", "usage": None, "seconds": 0.1, "message_index": None,
         "prompt_token_ids": [1, 2], "completion_token_ids": [3, 4],
         "completion_logprobs": [-0.5, -0.25]},
    ]  # fmt: skip
    path = _file_with(tmp_path, model_calls=calls, coverage=coverage)
    first = read_results(path).rollouts[0]
    assert first.coverage is not None
    assert first.coverage.to_json() == {
        "sampled_tokens": 2,
        "trained_tokens": 2,
        "branches": [{"began": "first", "calls": 1, "sampled_tokens": 2}],
    }
    result = CliRunner().invoke(cli, ["view", str(path), "-o", str(tmp_path / "page.html")])
    assert result.exit_code == 0, result.output
