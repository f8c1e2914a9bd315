"""The results store at its edges: resuming odd files, headers, line encoding, appending.

These drive ``ResultsStore`` and ``read_results`` directly (no environment, no server), so
they are fast enough for mutation testing (README, "Mutation testing"). Assertions are
on what a file holds and what a resume decides, not on the wording of messages.
"""

from __future__ import annotations

import errno
import io
import json
import math
import re
import resource
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import benchmax
from benchmax.results import (
    ResultsFileError,
    ResultsWriteError,
    RunDefinition,
    TrajectoryGroup,
    read_results,
)
from benchmax.results._definition_changes import definition_differences
from benchmax.results._line_encoding import encoded_line
from benchmax.results._reading import RESULTS_FORMAT
from benchmax.results._store import ResultsStore, new_run_id, results_header
from benchmax.runner import ResumeMismatchError
from benchmax.trajectory import Trajectory

DEFINITION: dict[str, Any] = {"env": {"name": "NumberEnv"}, "group_size": 2, "model": "m"}
RUN_ID_SHAPE = re.compile(r"\d{8}T\d{6}-[0-9a-f]{6}")


def rollout(index: int, position: int, *, attempt: int = 1, reward: float = 1.0) -> Trajectory:
    return Trajectory(
        rollout_id=f"run.e{index}.a{attempt}.r{position}",
        example_id=f"ex-{index}",
        example_index=index,
        group_index=position,
        attempt=attempt,
        run_id="run",
        termination_reason="finished" if position == 0 else "max_turns",
        rewards={"r": reward + position},
        usage={"prompt_tokens": 3, "completion_tokens": position},
        messages=({"role": "assistant", "content": f"reply {index}.{position}"},),
        annotations={"note": f"{index}.{position}"},
    )


def group(index: int, *, attempt: int = 1, reward: float = 1.0, size: int = 2) -> list[Trajectory]:
    return [rollout(index, k, attempt=attempt, reward=reward) for k in range(size)]


def lines_of(trajectories: Sequence[Trajectory]) -> bytes:
    return b"".join(encoded_line(t.to_json()) for t in trajectories)


def write_results(
    path: Path, *trajectories: Trajectory, definition: dict[str, Any] = DEFINITION
) -> bytes:
    data = encoded_line(results_header("run", definition)) + lines_of(trajectories)
    path.write_bytes(data)
    return data


def opened(
    path: Path,
    definition: dict[str, Any] = DEFINITION,
    *,
    force: bool = False,
    secrets: Sequence[str] = (),
    **recorded: Any,
) -> ResultsStore:
    return ResultsStore.open(
        path, RunDefinition(definition, secrets=tuple(secrets), **recorded), force=force
    )


def header_of(path: Path) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(path.read_bytes().splitlines()[0])
    return header


# --- resuming ------------------------------------------------------------------------------


def test_an_empty_file_becomes_a_new_results_file(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"")
    store = opened(path)
    store.close()
    assert RUN_ID_SHAPE.fullmatch(store.run_id) and store.groups == {}
    assert store.path == path and store.next_attempt(0) == 1
    header = header_of(path)
    assert header["run_id"] == store.run_id and header["definition"] == DEFINITION
    assert path.read_bytes().count(b"\n") == 1


def test_a_new_file_is_created_with_its_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "results.jsonl"
    store = opened(path)
    store.append(TrajectoryGroup(tuple(group(0))))
    store.close()
    assert [r.example_index for r in read_results(path).rollouts] == [0, 0]


def test_a_header_only_file_resumes_its_run_with_nothing_done(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    first = opened(path)
    first.close()
    before = path.read_bytes()
    second = opened(path)
    second.close()
    assert second.run_id == first.run_id and second.groups == {}
    assert second.next_attempt(0) == 1 and path.read_bytes() == before


def test_a_header_without_run_id_gets_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    header = {"type": "header", "format": RESULTS_FORMAT, "definition": DEFINITION}
    path.write_bytes(encoded_line(header) + lines_of(group(0)))
    store = opened(path)
    store.close()
    assert RUN_ID_SHAPE.fullmatch(store.run_id) and sorted(store.groups) == [0]


@pytest.mark.parametrize("content", [b"", b"   ", b'{"type": "header", "format": "x"}'])
def test_a_file_without_a_complete_header_line_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "results.jsonl"
    header = encoded_line(results_header("run", DEFINITION))
    path.write_bytes(content or header[:-1])  # a header torn before its newline
    with pytest.raises(ResultsFileError) as caught:
        read_results(path)
    assert str(path) in str(caught.value)
    before = path.read_bytes()
    with pytest.raises(ResultsFileError):
        opened(path)
    assert path.read_bytes() == before


def test_a_torn_last_line_is_cut_and_its_group_run_again(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    kept = write_results(path, *group(0), rollout(1, 0))
    torn = encoded_line(rollout(1, 1).to_json())
    path.write_bytes(kept + torn[: len(torn) // 2])
    store = opened(path)
    try:
        assert sorted(store.groups) == [0] and store.is_complete(0, "ex-0")
        assert not store.is_complete(1, "ex-1") and store.next_attempt(1) == 2
        assert path.read_bytes() == kept
        retry = group(1, attempt=2, reward=5.0)
        store.append(TrajectoryGroup(tuple(retry)))
    finally:
        store.close()
    rollouts = read_results(path).rollouts
    assert [(r.example_index, r.attempt) for r in rollouts] == [(0, 1), (0, 1), (1, 2), (1, 2)]
    assert rollouts[2:] == tuple(retry)


def test_a_resumed_group_is_summarised_as_it_was_written(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    rollouts = group(0)
    write_results(path, *reversed(rollouts))  # lines in any order within the group
    store = opened(path)
    store.close()
    assert list(store.groups) == [0]
    summary = store.groups[0]
    assert (summary.example_index, summary.example_id) == (0, "ex-0")
    assert summary.termination_reasons == ("finished", "max_turns")
    assert summary.rewards == ({"r": 1.0}, {"r": 2.0})
    assert summary.usage == (
        {"prompt_tokens": 3, "completion_tokens": 0},
        {"prompt_tokens": 3, "completion_tokens": 1},
    )
    assert [t.rollout_id for t in summary.trajectories] == [t.rollout_id for t in rollouts]
    assert all(t.messages is None for t in summary.trajectories)  # never a transcript
    assert read_results(path).rollouts == tuple(rollouts)


def test_usage_a_line_lacks_or_holds_as_garbage_is_no_usage(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    records: list[dict[str, Any]] = [dict(t.to_json()) for t in [*group(0), *group(1)]]
    records[1]["usage"] = "garbage"
    del records[2]["usage"]  # written before usage was recorded
    header = encoded_line(results_header("run", DEFINITION))
    path.write_bytes(header + b"".join(encoded_line(r) for r in records))
    store = opened(path)
    store.close()
    assert store.groups[0].usage == ({"prompt_tokens": 3, "completion_tokens": 0}, None)
    assert store.groups[1].usage == (None, {"prompt_tokens": 3, "completion_tokens": 1})


def test_a_later_complete_attempt_wins_wherever_its_lines_are(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    newer, older = group(0, attempt=2, reward=7.0), group(0, attempt=1)
    write_results(path, *newer, *older)
    store = opened(path)
    store.close()
    assert store.groups[0].rewards == ({"r": 7.0}, {"r": 8.0}) and store.next_attempt(0) == 3
    assert read_results(path).rollouts == tuple(newer)


def test_the_run_group_size_decides_completeness(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    three = {**DEFINITION, "group_size": 3}
    write_results(path, *group(0), *group(1, size=3), definition=three)
    store = opened(path, three)
    store.close()
    assert sorted(store.groups) == [1]
    assert [r.example_index for r in read_results(path).rollouts] == [1, 1, 1]


def test_another_group_size_needs_force_and_then_no_old_group_is_complete(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    before = write_results(path, *group(0), *group(1))
    larger = {**DEFINITION, "group_size": 3}
    with pytest.raises(ResumeMismatchError) as caught:
        opened(path, larger)
    assert caught.value.path == str(path) and len(caught.value.differences) == 1
    assert "group_size" in caught.value.differences[0]
    assert path.read_bytes() == before
    store = opened(path, larger, force=True)
    store.close()
    assert store.groups == {} and store.next_attempt(0) == 2 and store.run_id == "run"
    assert header_of(path)["definition"] == larger


def test_a_forced_resume_rewrites_only_the_header(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    data = write_results(path, *group(0), rollout(1, 0))
    body = data[data.find(b"\n") + 1 :]
    path.write_bytes(data + b'{"torn')
    changed = {**DEFINITION, "model": "other"}
    store = opened(path, changed, force=True)
    try:
        assert path.read_bytes().endswith(body) and path.read_bytes().count(b"\n") == 4
        assert sorted(store.groups) == [0] and store.next_attempt(1) == 2
        assert store.path == path and store.run_id == "run"
        store.append(TrajectoryGroup(tuple(group(1, attempt=2))))
    finally:
        store.close()
    header = header_of(path)
    assert header["definition"] == changed and header["previous_definitions"] == [DEFINITION]
    assert header["run_id"] == "run" and header["format"] == RESULTS_FORMAT
    assert [r.example_index for r in read_results(path).rollouts] == [0, 0, 1, 1]
    third = {**DEFINITION, "model": "third"}
    opened(path, third, force=True).close()
    assert header_of(path)["previous_definitions"] == [DEFINITION, changed]


def test_force_with_the_same_definition_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    before = write_results(path, *group(0))
    opened(path, force=True).close()
    assert path.read_bytes() == before


@pytest.fixture
def file_size_limit() -> Iterator[Any]:
    """Set the process's file size limit (bytes) inside the test; restored afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_a_forced_header_that_cannot_be_written_leaves_the_file(
    tmp_path: Path, file_size_limit: Any
) -> None:
    path = tmp_path / "results.jsonl"
    before = write_results(path, *group(0), *group(1))
    file_size_limit(len(before) // 2)
    try:
        with pytest.raises(ResultsWriteError) as caught:
            opened(path, {**DEFINITION, "model": "other"}, force=True)
    finally:
        file_size_limit(resource.RLIM_INFINITY)
    assert caught.value.path == str(path) and caught.value.errno == errno.EFBIG
    assert caught.value.action == "write"
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [path.name]
    opened(path).close()  # neither locked nor damaged


def test_a_location_that_cannot_be_created_is_an_open_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "results.jsonl"
    with pytest.raises(ResultsWriteError) as caught:
        opened(path)
    assert caught.value.action == "open" and caught.value.path == str(path)


def test_closing_releases_the_file_for_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    store = opened(path)
    with pytest.raises(ResultsFileError):
        opened(path)
    store.close()
    store.close()  # twice is harmless
    opened(path).close()


# --- lines that are not rollout records ---------------------------------------------------


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    "line",
    [
        b"{not json",  # ValueError
        b'{"example_index": 0}',  # KeyError: no attempt
        b"[0, 1]",  # TypeError: not an object
        b'{"example_index": "x", "attempt": 1}',  # ValueError: not an integer
        _nested(100_000),  # RecursionError
    ],
)
def test_a_line_that_is_not_a_rollout_record_names_file_and_line(
    tmp_path: Path, line: bytes
) -> None:
    path = tmp_path / "results.jsonl"
    before = write_results(path, *group(0)) + line + b"\n" + lines_of(group(1))
    path.write_bytes(before)
    for attempt in (lambda: read_results(path), lambda: opened(path)):
        with pytest.raises(ResultsFileError) as caught:
            attempt()
        assert f"{path}:4" in str(caught.value)
    assert path.read_bytes() == before


def test_integer_rewards_are_read_while_a_float_holds_them(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    largest = int(sys.float_info.max)
    records = [dict(t.to_json()) for t in group(0)]
    records[0]["rewards"] = {"top": largest, "one": 1}
    records[1]["rewards"] = {"bottom": -largest}
    header = encoded_line(results_header("run", DEFINITION))
    path.write_bytes(header + b"".join(encoded_line(r) for r in records))
    store = opened(path)
    store.close()
    assert store.groups[0].rewards == ({"top": largest, "one": 1}, {"bottom": -largest})
    for beyond in (largest + 1, -largest - 1):
        records[1]["rewards"] = {"r": beyond}
        path.write_bytes(header + b"".join(encoded_line(r) for r in records))
        with pytest.raises(ResultsFileError) as caught:
            opened(path)
        assert f"{path}:3" in str(caught.value)


# --- headers -------------------------------------------------------------------------------


def test_a_new_header_says_what_wrote_it_and_when(tmp_path: Path) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    header = results_header("run-1", {"a": 1})
    after = datetime.now(UTC)
    assert header["type"] == "header" and header["format"] == RESULTS_FORMAT
    assert header["run_id"] == "run-1" and header["definition"] == {"a": 1}
    assert header["benchmax_version"] == benchmax.__version__
    created = datetime.fromisoformat(header["created_at"])
    assert created.utcoffset() == timedelta(0) and created.microsecond == 0
    assert before <= created <= after
    assert "rescored_from" not in header
    rescored = results_header("run-2", {}, rescored_from={"run_id": "run-1"})
    assert rescored["rescored_from"] == {"run_id": "run-1"}


@pytest.fixture
def far_time_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Etc/GMT-14")  # UTC+14: local time is another day
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_run_ids_are_utc_timestamps_with_six_hex_digits(far_time_zone: None) -> None:
    run_id = new_run_id()
    assert RUN_ID_SHAPE.fullmatch(run_id)
    stamp = datetime.strptime(run_id[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=5)
    store = ResultsStore.open(None, RunDefinition(DEFINITION))
    assert RUN_ID_SHAPE.fullmatch(store.run_id) and store.path is None


def test_the_recorded_definition_is_canonical_json(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    definition = {"model": "m", "group_size": 2, "env": {"z": 1, "a": Path("/data")}}
    opened(path, definition).close()
    line = path.read_bytes().splitlines()[0]
    written = json.dumps(header_of(path)["definition"])
    assert written == '{"env": {"a": "/data", "z": 1}, "group_size": 2, "model": "m"}'
    assert written.encode() in line
    same = {"env": {"a": Path("/data"), "z": 1}, "group_size": 2, "model": "m"}
    opened(path, same).close()  # the same run, whatever the key order or value types


def test_definition_differences_see_past_keys_older_headers_lack() -> None:
    recorded = {"model": "a"}
    current = {"env_source": {"env.py": "1"}, "limits": {}, "model": "b"}
    assert len(definition_differences(recorded, current)) == 1
    assert "model" in definition_differences(recorded, current)[0]


def test_a_difference_shows_values_readably_and_shortened() -> None:
    (text,) = definition_differences({"x": {"b": "é", "a": 1}}, {"x": None})
    assert '{"a": 1, "b": "é"}' in text
    whole = "v" * 118  # 120 characters as JSON
    (text,) = definition_differences({"x": whole}, {"x": None})
    assert f'"{whole}"' in text
    long = "w" * 119
    (text,) = definition_differences({"x": long}, {"x": None})
    assert f'"{long[:116]}...' in text and long[:117] not in text


# --- line encoding -------------------------------------------------------------------------


class Odd:
    def __str__(self) -> str:
        return "odd value"


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def _depth(value: Any) -> tuple[int, Any]:
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    return depth, value


def _lists(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_a_line_is_utf8_json_in_the_records_key_order() -> None:
    line = encoded_line({"b": "é ☃", "a": 1})
    assert line == '{"b": "é ☃", "a": 1}\n'.encode()
    fallback = encoded_line({"b": "é", (1, 2): 5, "a": Odd()})  # a key JSON cannot hold
    assert fallback == '{"b": "é", "(1, 2)": 5, "a": "odd value"}\n'.encode()


def test_values_json_cannot_hold_are_written_as_text() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert json.loads(encoded_line({"c": cycle})) == {"c": [1, "<cycle>"]}
    assert json.loads(encoded_line({"u": Unprintable()})) == {"u": "<unprintable Unprintable>"}
    assert json.loads(encoded_line({"s": {3}, 1: True})) == {"s": "{3}", "1": True}


def test_nesting_is_kept_to_200_levels_when_a_line_needs_rewriting() -> None:
    for depth, expected in [(200, (200, "leaf")), (201, (200, "<too deep>"))]:
        line = encoded_line({(0,): None, "x": _lists(depth)})
        assert _depth(json.loads(line)["x"]) == expected
    # a line JSON writes as it is keeps every level, objects written as text
    deep = json.loads(encoded_line({"o": Odd(), "x": _lists(300)}))
    assert deep["o"] == "odd value" and _depth(deep["x"]) == (300, "leaf")


def test_integers_too_long_for_decimal_are_written_in_hexadecimal() -> None:
    huge = 10**5000
    assert json.loads(encoded_line({"n": huge, "m": -huge, "k": 7})) == {
        "n": hex(huge),
        "m": hex(-huge),
        "k": 7,
    }
    assert json.loads(encoded_line({(1,): huge, "t": True})) == {"(1,)": hex(huge), "t": True}
    assert json.loads(encoded_line({"n": 10**4000})) == {"n": 10**4000}


def test_non_finite_floats_and_surrogates_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    odd = replace(
        rollout(0, 0),
        annotations={"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "s": "a\ud800b"},
        timings={"group_seconds": math.inf},
    )
    store = opened(path, {**DEFINITION, "group_size": 1})
    store.append(TrajectoryGroup((odd,)))
    store.close()
    (back,) = read_results(path).rollouts
    assert math.isnan(back.annotations["nan"]) and back.annotations["s"] == "a\ud800b"
    assert back.annotations["inf"] == math.inf and back.annotations["-inf"] == -math.inf
    assert back.timings["group_seconds"] == math.inf
    fallback = encoded_line({(1,): "é\udc80", "f": math.nan})
    assert fallback == b'{"(1,)": "\xc3\xa9\\udc80", "f": NaN}\n'


# --- appending and secrets -----------------------------------------------------------------


def _appended(path: Path, secrets: Sequence[str], text: str) -> dict[str, Any]:
    store = opened(path, {**DEFINITION, "group_size": 1}, secrets=secrets)
    record = replace(rollout(0, 0), messages=({"role": "user", "content": text},))
    store.append(TrajectoryGroup((record,)))
    store.close()
    line: dict[str, Any] = json.loads(path.read_bytes().splitlines()[-1])
    return line


@pytest.mark.parametrize(
    "secret",
    ["sécrètvalué", "key\ud800surrogate", "plain-secret-1"],
)
def test_each_secret_alone_is_masked(tmp_path: Path, secret: str) -> None:
    line = _appended(tmp_path / "results.jsonl", ["", secret], f"it is {secret}!")
    assert line["transcript"] == [{"role": "user", "content": "it is ***!"}]


def test_a_resumed_store_masks_as_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    opened(path, {**DEFINITION, "group_size": 1}).close()
    line = _appended(path, ["plain-secret-1"], "x plain-secret-1")
    assert line["transcript"][0]["content"] == "x ***"


def test_a_store_without_a_file_remembers_groups(tmp_path: Path) -> None:
    store = ResultsStore.open(None, RunDefinition(DEFINITION, secrets=("s" * 8,)))
    store.append(TrajectoryGroup(tuple(group(3))))
    store.close()
    assert store.is_complete(3, "ex-3") and not store.is_complete(3, "ex-4")
    assert list(tmp_path.iterdir()) == []


class StubbornFile(io.RawIOBase):
    """A results handle whose writes make no progress, or fail, and cannot be cut back."""

    def __init__(self, *, fail: bool) -> None:
        self.fail = fail

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return 100

    def write(self, data: Any) -> int:
        if self.fail:
            raise OSError(errno.ENOSPC, "No space left on device")
        return 0

    def truncate(self, size: int | None = None) -> int:
        raise OSError(errno.EROFS, "Read-only file system")


@pytest.mark.parametrize(("fail", "code"), [(False, errno.EIO), (True, errno.ENOSPC)])
def test_a_write_that_cannot_finish_is_a_write_error(tmp_path: Path, fail: bool, code: int) -> None:
    path = tmp_path / "results.jsonl"
    store = ResultsStore(path, StubbornFile(fail=fail), "run", {}, {})  # type: ignore[arg-type]
    with pytest.raises(ResultsWriteError) as caught:
        store.append(TrajectoryGroup(tuple(group(0))))
    assert caught.value.errno == code and caught.value.path == str(path)
    assert len(getattr(caught.value, "__notes__", [])) == 1  # the cut back failed too
    assert store.groups == {}


def test_a_line_a_reader_cannot_turn_into_a_trajectory_names_file_and_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    record = dict(rollout(1, 0).to_json())
    del record["rollout_id"]  # enough for a resume's summary, not for a reader
    before = write_results(path, *group(0)) + encoded_line(record)
    path.write_bytes(before)
    with pytest.raises(ResultsFileError) as caught:
        read_results(path)
    assert f"{path}:4" in str(caught.value)


def test_the_next_attempt_is_one_past_the_highest_recorded(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    write_results(path, rollout(0, 0, attempt=0), rollout(1, 0, attempt=4))
    store = opened(path)
    store.close()
    assert (store.next_attempt(0), store.next_attempt(1), store.next_attempt(2)) == (1, 5, 1)
