"""The results readers' details that mutation testing found no test for: what the summary
reader keeps of each line, what a lazily read line holds, the usage counts a reader drops,
and the readers that stream trajectories (``read_trajectories``, ``iter_lazy_groups``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.view.synthetic import header, rollout, write

from benchmax.results import ResultsFileError, read_results, read_results_summary
from benchmax.results._reading import (
    GroupScan,
    iter_lazy_groups,
    iter_results,
    read_trajectories,
)
from benchmax.results._rollout_lines import LazyRollout, checked_record, summary_group


def two_attempt_file(tmp_path: Path) -> Path:
    """Example 0 at attempt 1 then again, complete, at attempt 2; example 5 at attempt 1."""
    records = [
        rollout(
            0, "ex0", k, rewards={"correct": 0.0}, transcript=[{"role": "user", "content": "q"}]
        )
        for k in range(2)
    ]
    second = [dict(r, attempt=2, rollout_id=f"again-{k}") for k, r in enumerate(records)]
    second[0]["rewards"] = {"correct": 1.0}
    later = [rollout(5, "ex5", k, rewards={"correct": 0.5}) for k in (1, 0)]  # out of order
    return write(tmp_path / "r.jsonl", header(group_size=2), [*records, *later, *second])


def test_the_summary_keeps_identity_attempt_and_group_order(tmp_path: Path) -> None:
    path = two_attempt_file(tmp_path)
    summary = read_results_summary(path)
    assert summary.header["run_id"] == "20260101T000000-abcdef"
    assert [(r.example_index, r.attempt, r.group_index) for r in summary.rollouts] == [
        (0, 2, 0),
        (0, 2, 1),
        (5, 1, 0),
        (5, 1, 1),
    ]
    assert [r.rollout_id for r in summary.rollouts[:2]] == ["again-0", "again-1"]
    assert summary.rollouts[0].rewards == {"correct": 1.0}
    assert all(r.messages is None for r in summary.rollouts)  # no transcript
    whole = read_results(path)
    assert [(r.rollout_id, r.attempt) for r in whole.rollouts] == [
        (r.rollout_id, r.attempt) for r in summary.rollouts
    ]


def test_a_line_without_rollout_id_gets_an_empty_one_in_the_summary(tmp_path: Path) -> None:
    records = [rollout(0, "ex0", k, rewards={"correct": 1.0}) for k in range(2)]
    del records[0]["rollout_id"]
    group = summary_group(tmp_path / "r.jsonl", records, 3, 4)
    assert [t.rollout_id for t in group.trajectories] == ["", records[1]["rollout_id"]]
    assert {(t.example_index, t.attempt) for t in group.trajectories} == {(3, 4)}


def test_a_record_no_trajectory_accepts_names_the_file_and_example(tmp_path: Path) -> None:
    records = [rollout(0, "ex0", k, rewards={"correct": 1.0}) for k in range(2)]
    records[1]["group_index"] = -1  # a checked record, but no Trajectory's
    path = tmp_path / "r.jsonl"
    with pytest.raises(ResultsFileError, match=rf"^{path}: example 7 has a damaged record: "):
        summary_group(path, records, 7, 1)


@pytest.mark.parametrize(
    ("usage", "kept"),
    [
        (
            {"prompt_tokens": 3, "completion_tokens": 4},
            {"prompt_tokens": 3, "completion_tokens": 4},
        ),
        ({"prompt_tokens": True, "completion_tokens": 4}, {"completion_tokens": 4}),
        ({"prompt_tokens": -1, "completion_tokens": 4}, {"completion_tokens": 4}),
        ({"prompt_tokens": 2.5, "completion_tokens": 4}, {"completion_tokens": 4}),
        ({"prompt_tokens": "3", "completion_tokens": 4}, {"completion_tokens": 4}),
        ({"made_up_tokens": 9, "completion_tokens": 4}, {"completion_tokens": 4}),
        ({"made_up_tokens": False}, {}),
        (None, None),
        ([1, 2], None),
    ],
)
def test_the_summary_keeps_only_the_usage_counts_a_trajectory_accepts(
    tmp_path: Path, usage: Any, kept: dict[str, int] | None
) -> None:
    records = [rollout(0, "ex0", k, rewards={"correct": 1.0}, usage={}) for k in range(2)]
    records[0]["usage"] = usage
    group = summary_group(tmp_path / "r.jsonl", records, 0, 1)
    assert group.trajectories[0].usage == kept


def test_a_lazy_line_holds_where_it_came_from_and_its_keys(tmp_path: Path) -> None:
    path = two_attempt_file(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    record = checked_record(path, 6, lines[5])
    lazy = LazyRollout(path, 6, lines[5], record)
    assert (lazy.path, lazy.line, lazy.raw) == (path, 6, lines[5])
    assert lazy.fields["example_index"] == 0 and lazy.fields["attempt"] == 2
    assert "transcript" not in lazy.fields
    assert (lazy.example_id, lazy.termination_reason, lazy.rewards) == (
        "ex0",
        "finished",
        {"correct": 1.0},
    )
    assert lazy.trajectory().rollout_id == "again-0"
    broken = LazyRollout(path, 6, lines[5].replace(b'"attempt": 2', b'"attempt": "x"'), record)
    with pytest.raises(ResultsFileError, match=rf"^{path}:6 is not a rollout record: "):
        broken.trajectory()


def test_lazy_groups_stream_in_file_order_with_their_keys(tmp_path: Path) -> None:
    path = two_attempt_file(tmp_path)
    head, groups = iter_lazy_groups(path)
    assert head["type"] == "header"
    seen = [
        [(r.fields["example_index"], r.fields["attempt"], r.line) for r in group]
        for group in groups
    ]
    assert seen == [[(0, 1, 2), (0, 1, 3)], [(5, 1, 5), (5, 1, 4)], [(0, 2, 6), (0, 2, 7)]]


def test_read_trajectories_streams_every_complete_group_whole(tmp_path: Path) -> None:
    path = two_attempt_file(tmp_path)
    with path.open("a") as handle:  # a group missing a line: never yielded
        handle.write(
            path.read_text().splitlines()[1].replace('"example_index": 0', '"example_index": 9')
            + "\n"
        )
    trajectories = list(read_trajectories(path))
    assert [(t.example_index, t.attempt, t.group_index) for t in trajectories] == [
        (0, 1, 0),
        (0, 1, 1),
        (5, 1, 0),
        (5, 1, 1),
        (0, 2, 0),
        (0, 2, 1),
    ]
    assert trajectories[0].messages is not None  # everything recorded
    assert [type(r).__name__ for r in iter_results(path)][:2] == ["dict", "Trajectory"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ResultsFileError, match="no complete header line"):
        list(read_trajectories(empty))


def test_keys_beyond_64_bits_keep_their_order_and_values(tmp_path: Path) -> None:
    huge = 2**64
    records = [
        rollout(index, f"ex{index}", k, rewards={"correct": 1.0})
        for index in (huge + 1, 3, huge)
        for k in range(2)
    ]
    path = write(tmp_path / "r.jsonl", header(group_size=2), records)
    scan = GroupScan(path, build=False)
    keys = [key for key, _group in scan]
    assert keys == [(huge + 1, 1), (3, 1), (huge, 1)]
    assert scan.chosen() == [1, 2, 0]
    assert [r.example_index for r in read_results_summary(path).rollouts] == [
        3,
        3,
        huge,
        huge,
        huge + 1,
        huge + 1,
    ]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"termination_reason": ""}, "termination_reason is empty"),
        ({"group_index": True}, "group_index is not an integer"),
        ({"group_index": "1"}, "group_index is not an integer"),
        ({"rewards": [1.0]}, "rewards is not an object"),
        ({"rewards": {"correct": True}}, "reward 'correct' is not a number"),
        ({"rewards": {"correct": "1"}}, "reward 'correct' is not a number"),
    ],
)
def test_each_damaged_field_is_named_with_file_and_line(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    line = json.dumps({**rollout(0, "ex0", 0, rewards={"correct": 1.0}), **change}).encode()
    path = tmp_path / "r.jsonl"
    with pytest.raises(ResultsFileError) as raised:
        checked_record(path, 4, line)
    assert str(raised.value) == f"{path}:4 is not a rollout record: {problem}"


def test_a_header_that_also_names_an_example_index_is_still_the_header(tmp_path: Path) -> None:
    head = {**header(group_size=2), "example_index": 0}
    path = write(
        tmp_path / "r.jsonl", head, [rollout(0, "ex0", k, rewards={"c": 1.0}) for k in (0, 1)]
    )
    assert len(read_results(path).rollouts) == 2
    first = rollout(0, "ex0", 0, rewards={"c": 1.0})
    path = write(tmp_path / "headless.jsonl", first, [])
    with pytest.raises(ResultsFileError) as raised:
        read_results(path)
    assert str(raised.value) == (
        f"{path}:1 is a rollout record, not the results header: a results file starts with "
        "its header line"
    )


def test_a_newer_format_names_the_way_out(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", {**header(), "format": "benchmax.results/9"}, [])
    with pytest.raises(ResultsFileError) as raised:
        read_results(path)
    assert str(raised.value).endswith(
        "use the benchmax version that wrote it, or write a new results file"
    )


def test_a_file_that_cannot_be_read_names_the_reason_alone(tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError) as raised:
        read_results(tmp_path)  # a directory
    assert str(raised.value) == f"cannot read {tmp_path}: Is a directory"
    unreadable = Path("/proc/self/mem")  # opens, then every read fails (EIO)
    with pytest.raises(ResultsFileError) as raised:
        read_results(unreadable)
    assert str(raised.value) == f"cannot read {unreadable}: Input/output error"


def test_a_scan_of_lazy_lines_keys_each_group(tmp_path: Path) -> None:
    path = two_attempt_file(tmp_path)
    scan = GroupScan(path, build=None)
    groups = list(scan)
    assert [key for key, _group in groups] == [(0, 1), (5, 1), (0, 2)]
    assert all(r.path == path for _key, group in groups for r in group)
    assert scan.chosen() == [2, 1]


def test_the_summary_reader_names_the_file_of_a_damaged_record(tmp_path: Path) -> None:
    records = [dict(rollout(0, "ex0", k, rewards={"correct": 1.0}), attempt=-1) for k in range(2)]
    path = write(tmp_path / "r.jsonl", header(group_size=2), records)  # attempt: no Trajectory's
    # checked line by line as ``read_results`` checks it, so named by file:line
    with pytest.raises(ResultsFileError, match=rf"^{path}:2 is not a rollout record: "):
        read_results_summary(path)
