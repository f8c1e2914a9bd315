"""``rescore_results`` and ``benchmax rescore``: stored transcripts scored again, no model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.view.conftest import EXAMPLES, invoke
from tests.view.rescore_envs import (
    LEAKED_KEY,
    BoundedEnv,
    NotFiniteEnv,
    NotNumericEnv,
    ScoreEnv,
    example,
)
from tests.view.synthetic import header, rollout, write

from benchmax.auth import StaticBearerAuth
from benchmax.cli import cli
from benchmax.results import read_results
from benchmax.runner import RESCORED_REASONS, GroupContractError, RunError, rescore_results

QUESTIONS = [("2+2", "4"), ("3+3", "6"), ("4+4", "8")]


def dataset(directory: Path) -> list[str]:
    directory.mkdir(exist_ok=True)
    rows = [{"question": q, "answer": a} for q, a in QUESTIONS]
    (directory / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return [example(row).id for row in rows]


def transcript(question: str, reply: str | None) -> list[dict[str, Any]]:
    messages = [{"role": "user", "content": question}]
    if reply is not None:
        messages.append({"role": "assistant", "content": reply})
    return messages


def stale(i: int, example_id: str, k: int, reply: str | None, reason: str) -> dict[str, Any]:
    return rollout(
        i, example_id, k, rewards={"correct": 0.0, "length": 0.0}, reason=reason,
        transcript=transcript(QUESTIONS[i][0], reply),
        logs=[{"time": "t", "level": "INFO", "logger": "run", "message": "from the run"}],
    )  # fmt: skip


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, Path]:
    ids = dataset(tmp_path / "data")
    records = [
        stale(0, ids[0], 0, "4", "finished"),
        stale(0, ids[0], 1, "4", "reward_error"),  # the old reward crashed; it reached scoring
        stale(0, ids[0], 2, None, "model_error"),  # never reached scoring: kept
        stale(1, ids[1], 0, "CRASH", "finished"),
        stale(1, ids[1], 1, "JUDGE", "finished"),
        stale(1, ids[1], 2, "6", "max_turns_exceeded"),
        stale(2, ids[2], 0, "8", "finished"),
        stale(2, ids[2], 1, "GROUPFAIL", "finished"),
        stale(2, ids[2], 2, "x", "tool_error"),
    ]
    head = header(group_size=3)
    head["definition"]["env"] = {"class": "x:Y", "constructor_args": {}, "source_digest": "abc"}
    return write(tmp_path / "run.jsonl", head, records), tmp_path / "data"


def settled(path: Path) -> list[tuple[str, dict[str, float]]]:
    return [(r.termination_reason, r.rewards) for r in read_results(path).rollouts]


async def test_rescoring_runs_the_reward_hooks_and_settles_failures_as_a_run_does(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    results, data = source
    env = ScoreEnv()
    output = tmp_path / "new.jsonl"
    report = await rescore_results(env, results, output, base_dir=data)
    zeros = {"correct": 0.0, "length": 0.0}
    assert settled(output) == [
        ("finished", {"correct": 1.0, "length": 2.0}),
        ("finished", {"correct": 1.0, "length": 2.0}),
        ("model_error", zeros),
        ("reward_error", zeros),
        ("judge_error", zeros),
        ("max_turns_exceeded", zeros),
        ("group_reward_error", zeros),
        ("group_reward_error", zeros),
        ("tool_error", zeros),
    ]
    assert len(env.scored) == 6  # every rollout that reached scoring, none other
    assert (report.groups, report.rollouts, report.rescored, report.kept) == (3, 9, 6, 3)
    assert report.changed == 6  # two now scored, four now failing (two by the group hook)
    assert report.old_stats["correct"].mean == 0.0
    assert report.new_stats["correct"].mean == pytest.approx(2 / 9)
    assert report.old_reasons == {
        "finished": 5, "reward_error": 1, "model_error": 1, "max_turns_exceeded": 1,
        "tool_error": 1,
    }  # fmt: skip
    assert report.new_reasons["group_reward_error"] == 2


async def test_the_new_file_records_where_it_came_from(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    results, data = source
    output = tmp_path / "out" / "new.jsonl"
    report = await rescore_results(ScoreEnv(), results, output, base_dir=data)
    old, new = read_results(results), read_results(output)
    assert new.header["run_id"] == report.run_id != old.header["run_id"]
    assert new.header["rescored_from"] == {
        "path": str(results),
        "run_id": old.header["run_id"],
        "env": {"class": "x:Y", "constructor_args": {}, "source_digest": "abc"},
    }
    assert new.definition == old.definition
    for before, after in zip(old.rollouts, new.rollouts, strict=True):
        assert after.run_id == report.run_id
        for field in ("rollout_id", "example_id", "group_index", "messages", "usage"):
            assert getattr(after, field) == getattr(before, field)
        assert after.timings["model_seconds"] == before.timings["model_seconds"]
        assert after.logs[0] == before.logs[0]
    crashed = new.rollouts[3]
    error = next(entry for entry in crashed.logs if entry["level"] == "ERROR")
    assert "termination_reason=reward_error" in error["message"]
    assert "RuntimeError: the reward crashed" in error["exception"]
    group_failed = new.rollouts[6]
    assert "the group hook broke" in json.dumps(group_failed.logs)
    assert new.rollouts[0].timings["reward_seconds"] != old.rollouts[0].timings["reward_seconds"]
    renamed = await rescore_results(
        ScoreEnv(), results, tmp_path / "b.jsonl", base_dir=data,
        env_definition={"class": "edited:Env", "constructor_args": {"a": 1}},
    )  # fmt: skip
    assert read_results(renamed.output).definition["env"] == {
        "class": "edited:Env",
        "constructor_args": {"a": 1},
    }


async def test_reward_timeout_bounds_the_hook(tmp_path: Path) -> None:
    ids = dataset(tmp_path / "data")
    records = [
        stale(0, ids[0], 0, "SLOW", "finished"),
        stale(0, ids[0], 1, "RAISES_TIMEOUT", "finished"),
        stale(0, ids[0], 2, "4", "reward_timeout"),
    ]
    results = write(tmp_path / "run.jsonl", header(group_size=3), records)
    report = await rescore_results(
        BoundedEnv(), results, tmp_path / "n.jsonl", base_dir=tmp_path / "data"
    )
    assert [reason for reason, _ in settled(report.output)] == [
        "reward_timeout",  # the deadline expired
        "reward_error",  # the hook's own TimeoutError is a reward error
        "finished",  # it timed out in the run and now scores in time
    ]


async def test_credentials_are_masked_in_the_logs_kept(tmp_path: Path) -> None:
    ids = dataset(tmp_path / "data")
    results = write(
        tmp_path / "run.jsonl", header(group_size=1), [stale(0, ids[0], 0, "LEAK", "finished")]
    )
    report = await rescore_results(
        ScoreEnv(), results, tmp_path / "n.jsonl", base_dir=tmp_path / "data",
        auth_providers={"judge": StaticBearerAuth(LEAKED_KEY)},
    )  # fmt: skip
    text = report.output.read_text()
    assert LEAKED_KEY not in text and "the judge rejected key ***" in text


async def test_a_contract_violation_raises_and_writes_nothing(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    results, data = source
    output = tmp_path / "new.jsonl"
    with pytest.raises(GroupContractError, match="must be numeric"):
        await rescore_results(NotNumericEnv(), results, output, base_dir=data)
    assert not output.exists()


async def test_a_non_finite_reward_settles_as_reward_error_as_in_a_run(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    # Rescore scores through BaseEnv's own scoring, so beyond.md §7 holds here too.
    results, data = source
    report = await rescore_results(NotFiniteEnv(), results, tmp_path / "new.jsonl", base_dir=data)
    old = {r.rollout_id: r for r in read_results(results).rollouts}
    for record in read_results(report.output).rollouts:
        if old[record.rollout_id].termination_reason in RESCORED_REASONS:
            assert record.termination_reason == "reward_error"
            assert record.rewards == {"correct": 0.0, "length": 0.0}


async def test_missing_examples_are_named(source: tuple[Path, Path], tmp_path: Path) -> None:
    results, data = source
    rows = (data / "eval.jsonl").read_text().splitlines()
    (data / "eval.jsonl").write_text(rows[0] + "\n")
    with pytest.raises(RunError, match=r"2 of 3 example\(s\) of .* are not in the eval split"):
        await rescore_results(ScoreEnv(), results, tmp_path / "new.jsonl", base_dir=data)
    report = await rescore_results(
        ScoreEnv(), results, tmp_path / "new.jsonl", base_dir=data, allow_missing=True
    )
    assert report.groups == 1 and len(report.missing_examples) == 2
    assert len(read_results(report.output).rollouts) == 3


async def test_refusals(source: tuple[Path, Path], tmp_path: Path) -> None:
    results, data = source
    with pytest.raises(RunError, match="data file not found"):
        await rescore_results(ScoreEnv(), results, tmp_path / "n.jsonl", base_dir=tmp_path)
    with pytest.raises(RunError, match="needs a BaseEnv"):
        await rescore_results(object(), results, tmp_path / "n.jsonl", base_dir=data)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrent_groups"):
        await rescore_results(
            ScoreEnv(), results, tmp_path / "n.jsonl", base_dir=data, max_concurrent_groups=0
        )
    lines = results.read_text().splitlines()
    record = json.loads(lines[1])
    record["transcript"] = None
    no_transcript = tmp_path / "none.jsonl"
    no_transcript.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    with pytest.raises(RunError, match="has no transcript to score"):
        await rescore_results(ScoreEnv(), no_transcript, tmp_path / "n.jsonl", base_dir=data)


async def test_rescoring_into_the_results_file_itself_is_refused(
    source: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, data = source
    before = results.read_bytes()
    monkeypatch.chdir(results.parent)
    for output in (results, Path(results.name), results.parent / "." / results.name):
        with pytest.raises(RunError, match="would replace the results it rescores"):
            await rescore_results(ScoreEnv(), results, output, base_dir=data)
    assert results.read_bytes() == before


def copy_calculator(tmp_path: Path, edit: tuple[str, str]) -> Path:
    package = tmp_path / "edited_calculator"
    shutil.copytree(EXAMPLES / "calculator", package)
    env = package / "env.py"
    source = env.read_text()
    assert edit[0] in source
    env.write_text(source.replace(*edit))
    return env


def test_rescore_a_copied_example_after_editing_its_reward(
    example_runs: dict[str, Path], tmp_path: Path
) -> None:
    run = example_runs["calculator"]
    env = copy_calculator(
        tmp_path,
        ('return {"correct": float(correct), "used_tools": float(used)}',
         'return {"correct": float(correct) * 0.5, "used_tools": 1.0 - float(used)}'),
    )  # fmt: skip
    output = tmp_path / "rescored.jsonl"
    result = invoke(
        "rescore", run, f"{env}:CalculatorEnv", "--data", EXAMPLES / "calculator", "-o", output
    )
    assert "rewards: before → after rescoring" in result.output
    assert f"results: {output}" in result.output
    old, new = read_results(run), read_results(output)
    assert new.definition["env"]["class"] == "edited_calculator.env:CalculatorEnv"
    assert len(new.rollouts) == len(old.rollouts)
    for before, after in zip(old.rollouts, new.rollouts, strict=True):
        assert after.termination_reason == before.termination_reason
        if before.termination_reason == "finished":
            assert after.rewards == {
                "correct": before.rewards["correct"] * 0.5,
                "used_tools": 1.0 - before.rewards["used_tools"],
            }
        else:
            assert after.rewards == {"correct": 0.0, "used_tools": 0.0}
    assert "correct" in result.output and "-0.3" in result.output  # mean 0.775 -> 0.388


def test_rescore_with_the_header_target_finds_the_class_beside_the_data(
    example_runs: dict[str, Path], tmp_path: Path
) -> None:
    run = example_runs["quickstart"]
    result = invoke("rescore", run, "--data", EXAMPLES / "quickstart")
    output = run.with_name(f"{run.stem}.rescored.jsonl")
    assert f"results: {output}" in result.output.replace("\n", "")
    assert "0 of 80 changed" in result.output
    assert settled(output) == settled(run)
    again = invoke("rescore", run, "--data", EXAMPLES / "quickstart")
    assert f"{run.stem}.rescored-2.jsonl" in again.output.replace("\n", "")


def test_rescore_calls_the_judge_as_a_run_does(
    example_runs: dict[str, Path], tmp_path: Path
) -> None:
    """The rubric run used '@mock': the rescore starts the mock with the run's policy."""
    run = example_runs["rubric_judge"]
    output = tmp_path / "judge.jsonl"
    invoke("rescore", run, "--data", EXAMPLES / "rubric_judge", "-o", output)
    assert settled(output) == settled(run)
    assert (
        read_results(output).header["rescored_from"]["run_id"] == read_results(run).header["run_id"]
    )
    # With the judge pointed at a server that is not there, every judged rollout fails.
    broken = tmp_path / "broken.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "rescore", str(run), "--data", str(EXAMPLES / "rubric_judge"), "-o", str(broken),
            "--env-arg", "judge_base_url=http://127.0.0.1:9/v1",
            "--auth", "judge=BENCHMAX_TEST_KEY",
        ],
        env={"BENCHMAX_TEST_KEY": "secret-judge-key"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    reasons = {reason for reason, _ in settled(broken)}
    assert reasons == {"judge_error"}
    assert "secret-judge-key" not in broken.read_text()


def test_rescore_defaults_to_the_recorded_data_and_finds_the_policy_beside_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started in ``proj`` with relative paths is rescored from elsewhere with no
    --data: the header's data directory is used and the recorded policy path is found
    relative to the results file's location."""
    project = tmp_path / "proj"
    shutil.copytree(EXAMPLES / "rubric_judge", project / "rubric_judge")
    monkeypatch.chdir(project)
    invoke(
        "run", "rubric_judge/env.py:RubricJudgeEnv", "--data", "rubric_judge",
        "--mock-policy", "rubric_judge/policy.py:respond", "-n", "3", "-k", "2",
        "--env-arg", "judge_base_url=@mock", "--auth", "judge=BENCHMAX_UNSET_VAR",
        "-o", "runs/judged.jsonl",
    )  # fmt: skip
    run = project / "runs" / "judged.jsonl"
    assert read_results(run).header["data_dir"] == str(project / "rubric_judge")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    output = elsewhere / "rescored.jsonl"
    invoke("rescore", run, "-o", output)
    assert settled(output) == settled(run)
    assert {reason for reason, _ in settled(output)} == {"finished"}  # the judge answered
    assert read_results(output).header["data_dir"] == str(project / "rubric_judge")


def test_rescore_names_a_recorded_data_directory_that_is_gone(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _data = source
    records = [json.loads(line) for line in run.read_text().splitlines()]
    records[0]["data_dir"] = str(tmp_path / "gone")
    run.write_text("".join(json.dumps(record) + "\n" for record in records))
    result = CliRunner().invoke(cli, ["rescore", str(run), "x.py:Env"])
    assert result.exit_code == 3
    assert f"the run's data directory {tmp_path / 'gone'} (recorded in {run}) is not there" in (
        result.output
    )
    assert "pass --data DIR" in result.output and result.output.count("\n") == 1


def test_rescore_refuses_to_replace_an_existing_output_without_force(
    example_runs: dict[str, Path], tmp_path: Path
) -> None:
    run = example_runs["quickstart"]
    output = tmp_path / "taken.jsonl"
    output.write_text("keep me\n")
    args = ["rescore", str(run), "--data", str(EXAMPLES / "quickstart"), "-o", str(output)]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 3
    assert f"{output} exists; pass --force to replace it, or another -o" in refused.output
    assert output.read_text() == "keep me\n"
    invoke(*args, "--force")
    assert settled(output) == settled(run)


def test_a_policy_not_found_anywhere_is_named_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    shutil.copytree(EXAMPLES / "rubric_judge", project / "rubric_judge")
    monkeypatch.chdir(project)
    invoke(
        "run", "rubric_judge/env.py:RubricJudgeEnv", "--data", "rubric_judge",
        "--mock-policy", "rubric_judge/policy.py:respond", "-n", "1", "-k", "1",
        "--env-arg", "judge_base_url=@mock", "-o", "judged.jsonl",
    )  # fmt: skip
    (project / "rubric_judge" / "policy.py").rename(project / "moved.py")
    result = CliRunner().invoke(cli, ["rescore", "judged.jsonl", "-o", "out.jsonl"])
    assert result.exit_code == 3
    assert "policy.py" in result.output and "pass --mock-policy" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "/nonexistent"], "data directory not found: /nonexistent"),
        (["nope.py:Env"], "no such file"),
        (["--env-arg", "1x=2"], "invalid --env-arg"),
        (["--auth", "judge"], "invalid --auth"),
    ],
)
def test_rescore_reports_bad_input_in_one_line(
    example_runs: dict[str, Path], args: list[str], message: str
) -> None:
    result = CliRunner().invoke(cli, ["rescore", str(example_runs["quickstart"]), *args])
    assert result.exit_code != 0
    assert message in result.output and result.output.count("\n") == 1, result.output


def test_rescore_of_a_bundle_run_needs_a_target(tmp_path: Path, source: tuple[Path, Path]) -> None:
    results, data = source
    lines = results.read_text().splitlines()
    head = json.loads(lines[0])
    head["definition"]["env"] = {"bundle_digest": "sha256:abc"}
    bundled = tmp_path / "bundled.jsonl"
    bundled.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    result = CliRunner().invoke(cli, ["rescore", str(bundled), "--data", str(data)])
    assert result.exit_code == 3 and "the run used a bundle" in result.output
    head["definition"]["env"] = {"class": "not_a_module_anywhere:Env"}
    bundled.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    result = CliRunner().invoke(cli, ["rescore", str(bundled), "--data", str(data)])
    assert result.exit_code == 3 and "pass TARGET" in result.output


def test_rescore_with_a_bundle_target(example_runs: dict[str, Path], tmp_path: Path) -> None:
    bundle = tmp_path / "qs.bundle"
    invoke("bundle", f"{EXAMPLES / 'quickstart'}/env.py:QuickStartEnv", "-o", bundle)
    run = example_runs["quickstart"]
    output = tmp_path / "bundled.jsonl"
    invoke("rescore", run, bundle, "--data", EXAMPLES / "quickstart", "-o", output)
    env = read_results(output).definition["env"]
    assert len(env["bundle_digest"]) == 64 and env["constructor_args"] == {}
    assert settled(output) == settled(run)


async def test_a_lone_surrogate_in_a_stored_transcript_is_written_back(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    # The results file holds a model's lone surrogate as its JSON escape; rescore writes
    # its file with the results writer's own encoder, so the write never fails on it.
    results, data = source
    lines = results.read_text().splitlines()
    record = json.loads(lines[1])
    record["transcript"][-1]["content"] += "\ud800"
    lines[1] = json.dumps(record)  # ensure_ascii: the surrogate as \ud800
    results.write_text("\n".join(lines) + "\n")
    report = await rescore_results(ScoreEnv(), results, tmp_path / "new.jsonl", base_dir=data)
    rescored = {r.rollout_id: r for r in read_results(report.output).rollouts}
    assert rescored[record["rollout_id"]].messages[-1]["content"].endswith("\ud800")


async def test_annotations_made_while_rescoring_join_the_record(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    from benchmax.envs import BaseRollout
    from benchmax.trajectory import annotate

    class ExplainingEnv(ScoreEnv):
        async def compute_reward(self, rollout: BaseRollout) -> Any:
            annotate("explanation", f"scored {rollout.messages[-1]['content']}")
            return await super().compute_reward(rollout)

    results, data = source
    report = await rescore_results(ExplainingEnv(), results, tmp_path / "new.jsonl", base_dir=data)
    by_id = {r.rollout_id: r for r in read_results(report.output).rollouts}
    first = read_results(results).rollouts[0]
    assert by_id[first.rollout_id].annotations == {"explanation": "scored 4"}
    never_scored = read_results(results).rollouts[2]  # model_error: not rescored
    assert by_id[never_scored.rollout_id].annotations == {}


async def test_a_huge_example_index_is_read_by_rescore_view_and_compare(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    """An example_index beyond 64 bits used to end in OverflowError (the streaming readers
    keep the indexes in 8-byte arrays)."""
    results, data = source
    huge = 10**30
    lines = results.read_text().splitlines()
    lines[1:4] = [
        line.replace('"example_index": 0,', f'"example_index": {huge},') for line in lines[1:4]
    ]
    results.write_text("\n".join(lines) + "\n")
    assert [r.example_index for r in read_results(results).rollouts][-3:] == [huge] * 3
    output = tmp_path / "new.jsonl"
    report = await rescore_results(ScoreEnv(), results, output, base_dir=data)
    assert (report.groups, report.rollouts) == (3, 9)
    assert read_results(output).rollouts[-1].example_index == huge
    view = CliRunner().invoke(cli, ["view", str(results)])
    assert view.exit_code == 0, view.output
    compare = CliRunner().invoke(cli, ["compare", str(results), str(output)])
    assert compare.exit_code == 0, compare.output
