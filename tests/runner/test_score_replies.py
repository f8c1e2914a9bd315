"""``score_replies``: fixed replies to a split's examples, scored through rescore's path."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.runner.sample_envs import AnswerEnv, write_answer_data

from benchmax.results import compare_results, read_results
from benchmax.runner import FixedReply, RunError, score_replies


def replies(texts: list[str]) -> list[FixedReply]:
    return [FixedReply({"role": "assistant", "content": text}) for text in texts]


async def test_replies_are_scored_by_the_env_and_written_as_a_results_file(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=4)
    output = tmp_path / "fixed.jsonl"
    report = await score_replies(
        AnswerEnv(), replies(["q0", "q1", "nope", "other"]), output, base_dir=tmp_path,
        model="prod-model",
    )  # fmt: skip
    assert report.rollouts == 4 and report.new_stats["correct"].mean == 0.5
    results = read_results(output)
    assert [r.rewards["correct"] for r in results.rollouts] == [1.0, 0.0, 0.0, 1.0]
    assert results.definition["model"] == "prod-model"
    assert results.definition["split"] == "eval" and results.definition["group_size"] == 1
    assert list(results.rollouts[0].messages or ()) == [
        {"role": "user", "content": "q0"},
        {"role": "assistant", "content": "q0"},
    ]
    assert results.header["rescored_from"]["path"] == str(tmp_path / ".fixed-unscored.jsonl")
    same = compare_results(results, read_results(output))
    assert same.matched == 4 and same.keys[0].difference == 0


async def test_a_count_that_differs_from_the_split_is_refused(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=3)
    for texts in (["a", "b"], ["a", "b", "c", "d"]):
        with pytest.raises(RunError, match=r"replies for the 3 examples .* paired in order"):
            await score_replies(
                AnswerEnv(), replies(texts), tmp_path / "x.jsonl", base_dir=tmp_path
            )
    assert not (tmp_path / "x.jsonl").exists()


async def test_a_missing_split_is_a_run_error(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="data file not found"):
        await score_replies(AnswerEnv(), replies(["a"]), tmp_path / "x.jsonl", base_dir=tmp_path)


def test_a_fixed_reply_is_an_assistant_message() -> None:
    with pytest.raises(ValueError, match="assistant message"):
        FixedReply({"role": "user", "content": "hi"})
