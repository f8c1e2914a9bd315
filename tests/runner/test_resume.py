"""Resuming a results file: complete groups are kept, partial ones redone, mismatches refused."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from tests.runner.sample_envs import NumberEnv, number_config

from benchmax.envs import Dataset, Example
from benchmax.results import ResultsFileError, RunDefinition, read_results
from benchmax.results._store import ResultsStore, _write_all
from benchmax.runner import ResumeMismatchError, run_environment


def outcome_table(path: Path) -> dict[tuple[int, int], tuple[str, dict]]:
    return {
        (r.example_index, r.group_index): (r.termination_reason, r.rewards)
        for r in read_results(path).rollouts
    }


async def interrupted_file(tmp_path: Path) -> tuple[Path, dict, list[str]]:
    """A 6-example results file cut after 2 complete groups, 2 lines of group 2, a torn line."""
    full = tmp_path / "full.jsonl"
    await run_environment(NumberEnv(6), number_config(tmp_path, output=full))
    raw = full.read_text().splitlines(keepends=True)
    header, rollouts = raw[0], raw[1:]
    partial_ids = [json.loads(line)["rollout_id"] for line in rollouts[6:8]]
    cut = tmp_path / "cut.jsonl"
    cut.write_text(header + "".join(rollouts[:8]) + rollouts[8][:25])
    return cut, outcome_table(full), partial_ids


async def test_resume_runs_only_missing_groups_and_matches_a_full_run(tmp_path: Path) -> None:
    cut, expected, partial_ids = await interrupted_file(tmp_path)
    env = NumberEnv(6)
    report = await run_environment(env, number_config(tmp_path, output=cut))
    assert sorted(env.started) == [2, 3, 4, 5]
    assert report.groups_resumed == 2 and report.groups == 6 and report.rollouts_run == 12
    assert outcome_table(cut) == expected
    records = [json.loads(line) for line in cut.read_text().splitlines()]  # no torn line left
    redone = [r for r in records[1:] if r["example_index"] == 2 and r["attempt"] == 2]
    assert len(redone) == 3
    assert not {r["rollout_id"] for r in redone} & set(partial_ids)
    assert len({r["run_id"] for r in records}) == 1


async def test_resume_of_a_complete_file_runs_nothing(tmp_path: Path) -> None:
    config = number_config(tmp_path)
    await run_environment(NumberEnv(4), config)
    before = (tmp_path / "results.jsonl").read_bytes()
    env = NumberEnv(4)
    report = await run_environment(env, config)
    assert env.started == []
    assert report.groups_resumed == 4 and report.rollouts_run == 0 and report.rollouts == 12
    assert (tmp_path / "results.jsonl").read_bytes() == before


@pytest.mark.parametrize("larger", [4, None])
async def test_a_larger_max_examples_resumes_the_first_groups(
    tmp_path: Path, larger: int | None
) -> None:
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=2))
    first = outcome_table(tmp_path / "results.jsonl")
    env = NumberEnv(6)
    report = await run_environment(env, number_config(tmp_path, max_examples=larger))
    assert sorted(env.started) == ([2, 3] if larger == 4 else [2, 3, 4, 5])
    assert report.groups_resumed == 2 and report.groups == (larger or 6)
    table = outcome_table(tmp_path / "results.jsonl")
    assert {position: table[position] for position in first} == first
    header = read_results(tmp_path / "results.jsonl").header
    assert header["definition"]["max_examples"] == larger
    assert header["previous_definitions"][0]["max_examples"] == 2
    again = await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=larger))
    assert again.rollouts_run == 0


async def test_a_smaller_max_examples_still_needs_force(tmp_path: Path) -> None:
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=4))
    before = (tmp_path / "results.jsonl").read_bytes()
    with pytest.raises(ResumeMismatchError, match=r"max_examples was 4, now 2"):
        await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=2))
    await run_environment(NumberEnv(6), number_config(tmp_path / "all", max_examples=None))
    with pytest.raises(ResumeMismatchError, match=r"max_examples was null, now 3"):
        await run_environment(NumberEnv(6), number_config(tmp_path / "all", max_examples=3))
    assert (tmp_path / "results.jsonl").read_bytes() == before


async def test_a_larger_max_examples_with_another_change_still_needs_force(
    tmp_path: Path,
) -> None:
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=2))
    with pytest.raises(ResumeMismatchError) as caught:
        await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=4, model="o"))
    assert "max_examples was 2, now 4" in str(caught.value)
    assert 'model was "m", now "o"' in str(caught.value)


async def test_a_larger_max_examples_reruns_a_group_whose_example_changed(
    tmp_path: Path,
) -> None:
    await run_environment(NumberEnv(3), number_config(tmp_path, max_examples=2))
    env = NumberEnv(3)

    async def dataset(split, base_dir, *, max_examples=None):  # type: ignore[no-untyped-def]
        ids = ["ex-0", "ex-shuffled", "ex-2"]
        return Dataset([Example(id=i, payload={"value": v}) for v, i in enumerate(ids)])

    env.create_dataset = dataset  # type: ignore[method-assign]
    report = await run_environment(env, number_config(tmp_path, max_examples=3))
    assert sorted(env.started) == [1, 2] and report.groups_resumed == 1
    rollouts = read_results(tmp_path / "results.jsonl").rollouts
    assert [r.example_id for r in rollouts if r.example_index == 1] == ["ex-shuffled"] * 3


async def test_mismatch_names_every_difference_and_leaves_the_file(tmp_path: Path) -> None:
    await run_environment(NumberEnv(2), number_config(tmp_path))
    before = (tmp_path / "results.jsonl").read_bytes()
    env = NumberEnv(2)
    with pytest.raises(ResumeMismatchError) as caught:
        await run_environment(env, number_config(tmp_path, model="other", group_size=2))
    message = str(caught.value)
    assert 'model was "m", now "other"' in message
    assert "group_size was 3, now 2" in message
    assert "split" not in message
    assert "--force (force=True)" in message
    assert env.started == []
    assert (tmp_path / "results.jsonl").read_bytes() == before


async def test_force_resumes_a_differing_run_and_records_the_old_definition(
    tmp_path: Path,
) -> None:
    await run_environment(NumberEnv(2), number_config(tmp_path, max_examples=2))
    env = NumberEnv(4)
    report = await run_environment(env, number_config(tmp_path, max_examples=4, force=True))
    assert sorted(env.started) == [2, 3]
    assert report.groups == 4
    header = read_results(tmp_path / "results.jsonl").header
    assert header["definition"]["max_examples"] == 4
    assert header["previous_definitions"][0]["max_examples"] == 2


async def test_a_changed_example_at_an_index_is_run_again(tmp_path: Path) -> None:
    await run_environment(NumberEnv(3), number_config(tmp_path))
    env = NumberEnv(3)
    env.payloads = [{"value": 0}, {"value": 10}, {"value": 2}]

    async def dataset(split, base_dir, *, max_examples=None):  # type: ignore[no-untyped-def]
        ids = ["ex-0", "ex-changed", "ex-2"]
        return Dataset([Example(id=i, payload=p) for i, p in zip(ids, env.payloads, strict=True)])

    env.create_dataset = dataset  # type: ignore[method-assign]
    await run_environment(env, number_config(tmp_path))
    assert env.started == [10]
    rollouts = read_results(tmp_path / "results.jsonl").rollouts
    assert [r.example_id for r in rollouts if r.example_index == 1] == ["ex-changed"] * 3


async def test_a_file_that_is_not_a_results_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"hello": "world"}\n')
    with pytest.raises(ResultsFileError, match="not a benchmax results file"):
        await run_environment(NumberEnv(1), number_config(tmp_path))
    assert path.read_text() == '{"hello": "world"}\n'


async def test_a_corrupt_line_in_the_middle_is_refused(tmp_path: Path) -> None:
    await run_environment(NumberEnv(2), number_config(tmp_path))
    path = tmp_path / "results.jsonl"
    raw = path.read_text().splitlines(keepends=True)
    path.write_text(raw[0] + "garbage\n" + "".join(raw[1:]))
    with pytest.raises(ResultsFileError, match=r"results.jsonl:2 is not a rollout record"):
        await run_environment(NumberEnv(2), number_config(tmp_path))


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("rewards", {"hit": "x", "value": 1.0}, "reward 'hit' is not a number"),
        ("rewards", {"hit": True, "value": 1.0}, "reward 'hit' is not a number"),
        ("rewards", [1.0], "rewards is not an object"),
        ("termination_reason", None, "termination_reason is not a string"),
        ("example_id", 7, "example_id is not a string"),
        ("group_index", "0", "group_index is not an integer"),
        ("group_index", None, "group_index is not an integer"),
    ],
)
async def test_a_rollout_line_with_a_wrong_field_is_refused_naming_it(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    await run_environment(NumberEnv(2), number_config(tmp_path))
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record[field] = value
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    message = re.escape(f"results.jsonl:3 is not a rollout record: {problem}")
    with pytest.raises(ResultsFileError, match=message):
        read_results(path)


async def test_read_results_leaves_out_partial_groups(tmp_path: Path) -> None:
    cut, _, _ = await interrupted_file(tmp_path)
    results = read_results(cut)
    assert {r.example_index for r in results.rollouts} == {0, 1}
    assert results.definition["group_size"] == 3


async def test_a_results_file_is_locked_while_a_run_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    first = ResultsStore.open(path, RunDefinition({"a": 1, "group_size": 1}))
    try:
        with pytest.raises(ResultsFileError, match="is in use by another run"):
            ResultsStore.open(path, RunDefinition({"a": 1, "group_size": 1}))
        with pytest.raises(ResultsFileError, match="is in use by another run"):
            await run_environment(NumberEnv(1), number_config(tmp_path))
    finally:
        first.close()
    second = ResultsStore.open(path, RunDefinition({"a": 1, "group_size": 1}))  # free again
    second.close()


def test_short_writes_are_completed() -> None:
    class Trickle(io.RawIOBase):
        def __init__(self) -> None:
            self.data = b""

        def writable(self) -> bool:
            return True

        def write(self, chunk) -> int:  # type: ignore[no-untyped-def, override]
            self.data += bytes(chunk[:3])
            return min(3, len(chunk))

    sink = Trickle()
    _write_all(sink, b"0123456789")  # type: ignore[arg-type]
    assert sink.data == b"0123456789"


async def test_a_group_with_a_duplicated_position_is_not_complete(tmp_path: Path) -> None:
    await run_environment(NumberEnv(2), number_config(tmp_path))
    path = tmp_path / "results.jsonl"
    raw = path.read_text().splitlines(keepends=True)
    header, group0, group1 = raw[0], raw[1:4], raw[4:7]
    path.write_text(header + group0[0] + group0[1] + group0[1] + "".join(group1))
    assert {r.example_index for r in read_results(path).rollouts} == {1}
    env = NumberEnv(2)
    await run_environment(env, number_config(tmp_path))
    assert env.started == [0]


def test_a_write_that_makes_no_progress_raises_instead_of_looping() -> None:
    class Stuck(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, chunk) -> int:  # type: ignore[no-untyped-def, override]
            return 0

    with pytest.raises(OSError, match="accepted no more bytes"):
        _write_all(Stuck(), b"data")  # type: ignore[arg-type]
