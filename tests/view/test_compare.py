"""``compare_results`` and ``bootstrap_interval`` on fixtures small enough to compute by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.view.synthetic import header, rollout, write

from benchmax.cli import cli
from benchmax.results import (
    PassAtK,
    ResultsFileError,
    bootstrap_interval,
    compare_files,
    compare_results,
    read_results,
)


def run_file(path: Path, groups: dict[str, list[dict[str, float]]]) -> Path:
    records = [
        rollout(i, example_id, k, rewards=rewards)
        for i, (example_id, group) in enumerate(groups.items())
        for k, rewards in enumerate(group)
    ]
    return write(path, header(group_size=2), records)


def r(correct: float, score: float) -> dict[str, float]:
    return {"correct": correct, "score": score}


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = run_file(tmp_path / "a.jsonl", {
        "e1": [r(1, 0.25), r(0, 0.25)],   # correct mean 0.5, score 0.25
        "e2": [r(0, 0.5), r(0, 0.5)],     # 0.0, 0.5
        "e3": [r(1, 1.0), r(1, 0.5)],     # 1.0, 0.75
        "only-a": [r(0, 0), r(0, 0)],
    })  # fmt: skip
    b = run_file(tmp_path / "b.jsonl", {
        "only-b": [r(1, 1), r(1, 1)],
        "e3": [r(1, 0.5), r(1, 0.5)],     # 1.0, 0.5
        "e2": [r(0, 0.5), r(1, 0.5)],     # 0.5, 0.5
        "e1": [r(1, 0.75), r(1, 0.75)],   # 1.0, 0.75
    })  # fmt: skip
    return a, b


def test_paired_differences_shares_and_pass_at_k(runs: tuple[Path, Path]) -> None:
    comparison = compare_results(read_results(runs[0]), read_results(runs[1]))
    assert (comparison.matched, comparison.only_in_a, comparison.only_in_b) == (3, 1, 1)
    correct, score = comparison.keys
    assert correct.key == "correct" and correct.examples == 3
    assert correct.mean_a == pytest.approx(0.5)  # (0.5 + 0 + 1) / 3
    assert correct.mean_b == pytest.approx(2.5 / 3)  # (1 + 0.5 + 1) / 3
    assert correct.difference == pytest.approx(1 / 3)  # differences 0.5, 0.5, 0
    assert (correct.better, correct.worse, correct.equal) == pytest.approx((2 / 3, 0, 1 / 3))
    # Resampled means of (0.5, 0.5, 0) are 0, 1/6, 1/3 or 1/2; P(0) = 1/27 > 2.5% and
    # P(1/2) = 8/27 > 2.5%, so the percentile interval is [0, 1/2].
    assert correct.interval == (0.0, 0.5)
    assert correct.pass_a == PassAtK(k=2, pass_at_1=0.5, pass_at_k=2 / 3, any_success_share=2 / 3)
    assert correct.pass_b == PassAtK(
        k=2, pass_at_1=pytest.approx(2.5 / 3), pass_at_k=1.0, any_success_share=1.0
    )
    assert score.mean_a == pytest.approx(0.5) and score.mean_b == pytest.approx(1.75 / 3)
    assert score.difference == pytest.approx(0.25 / 3)  # differences +0.5, 0, -0.25
    assert (score.better, score.worse, score.equal) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert score.pass_a is None and score.pass_b is None
    low, high = score.interval
    assert -0.25 <= low < score.difference < high <= 0.5


def test_examples_that_changed_most(runs: tuple[Path, Path]) -> None:
    comparison = compare_results(read_results(runs[0]), read_results(runs[1]), key="score")
    changes = [(c.example_id, c.mean_a, c.mean_b) for c in comparison.changed_most]
    assert changes == [("e1", 0.25, 0.75), ("e3", 0.75, 0.5)]  # e2 did not change
    assert comparison.changed_most[1].difference == -0.25
    top_one = compare_results(read_results(runs[0]), read_results(runs[1]), top=1)
    assert [c.example_id for c in top_one.changed_most] == ["e1"]  # ties keep A's order


def test_keys_only_in_one_run_are_named(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", {"e": [{"x": 1, "old": 1}, {"x": 0, "old": 0}]})
    b = run_file(tmp_path / "b.jsonl", {"e": [{"x": 1, "new": 1}, {"x": 1, "new": 0}]})
    comparison = compare_results(read_results(a), read_results(b))
    assert [k.key for k in comparison.keys] == ["x"]
    assert comparison.keys_only_in_a == ("old",) and comparison.keys_only_in_b == ("new",)


def test_refuses_runs_without_common_examples_or_keys(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", {"e1": [r(1, 1), r(0, 1)]})
    b = run_file(tmp_path / "b.jsonl", {"e2": [r(1, 1), r(0, 1)]})
    with pytest.raises(ValueError, match=r"no examples in common: A has 1 .* B has 1"):
        compare_results(read_results(a), read_results(b))
    c = run_file(tmp_path / "c.jsonl", {"e1": [{"other": 1.0}, {"other": 0.0}]})
    with pytest.raises(ValueError, match="share no reward key"):
        compare_results(read_results(a), read_results(c))
    with pytest.raises(ValueError, match="'nope' is not in both runs"):
        compare_results(read_results(a), read_results(a), key="nope")


def test_bootstrap_interval_edge_cases() -> None:
    assert bootstrap_interval([0.25]) == (0.25, 0.25)
    assert bootstrap_interval([0.5] * 7) == (0.5, 0.5)
    assert bootstrap_interval([0.0, 1.0], resamples=4000) == (0.0, 1.0)
    values = [0.1 * i for i in range(40)]
    first = bootstrap_interval(values, seed=7)
    assert first == bootstrap_interval(values, seed=7)  # seeded: reproducible
    mean = math.fsum(values) / len(values)
    assert min(values) < first[0] < mean < first[1] < max(values)
    narrow = bootstrap_interval(values, confidence=0.5, seed=7)
    assert first[0] < narrow[0] < narrow[1] < first[1]


@pytest.mark.parametrize(
    ("values", "options", "message"),
    [
        ([], {}, "at least one value"),
        ([1.0, math.nan], {}, "finite"),
        ([1.0, math.inf], {}, "finite"),
        ([1.0, 2.0], {"confidence": 1.0}, "confidence"),
        ([1.0, 2.0], {"confidence": 0.0}, "confidence"),
        ([1.0, 2.0], {"resamples": 0}, "resamples"),
    ],
)
def test_bootstrap_interval_rejects_bad_input(
    values: list[float], options: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(values, **options)  # type: ignore[arg-type]


def test_the_compare_command(runs: tuple[Path, Path]) -> None:
    result = CliRunner().invoke(cli, ["compare", str(runs[0]), str(runs[1]), "--key", "score"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "matched 3 examples by id; 1 only in A; 1 only in B" in out
    assert "+0.333" in out and "[+0.000, +0.500]" in out and "67%/0%/33%" in out
    assert "0.667" in out and "1.000" in out  # pass@2 of A and B
    assert "examples that changed most (score)" in out and "e1" in out


def test_the_compare_command_refuses_unrelated_runs(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", {"e1": [r(1, 1), r(0, 1)]})
    b = run_file(tmp_path / "b.jsonl", {"e2": [r(1, 1), r(0, 1)]})
    result = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert result.exit_code == 3
    assert "no examples in common" in result.output
    missing = CliRunner().invoke(cli, ["compare", str(a), str(tmp_path / "nope.jsonl")])
    assert (
        missing.exit_code == 3
        and "cannot read" in missing.output
        and "No such file" in missing.output
    )


def test_compare_json_gives_the_documented_shape(runs: tuple[Path, Path]) -> None:
    result = CliRunner().invoke(
        cli, ["compare", str(runs[0]), str(runs[1]), "--key", "score", "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert list(document) == [
        "a", "b", "matched", "only_in_a", "only_in_b", "keys", "keys_only_in_a",
        "keys_only_in_b", "changed_most",
    ]  # fmt: skip
    assert (document["a"], document["b"]) == (str(runs[0]), str(runs[1]))
    assert (document["matched"], document["only_in_a"], document["only_in_b"]) == (3, 1, 1)
    score = next(item for item in document["keys"] if item["key"] == "score")
    assert score["examples"] == 3
    assert score["mean_a"] == pytest.approx(0.5) and score["mean_b"] == pytest.approx(0.5833333)
    assert score["difference"] == pytest.approx(1 / 12)
    assert len(score["interval"]) == 2
    assert score["pass_a"] is None and score["pass_b"] is None  # not a binary key
    correct = next(item for item in document["keys"] if item["key"] == "correct")
    assert (correct["better"], correct["worse"], correct["equal"]) == pytest.approx(
        (2 / 3, 0, 1 / 3)
    )
    assert correct["pass_b"] == {
        "k": 2, "pass_at_1": pytest.approx(5 / 6), "pass_at_k": 1.0,
        "any_success_share": 1.0,
    }  # fmt: skip
    assert document["changed_most"][0] == {
        "example_id": "e1", "key": "score", "mean_a": 0.25, "mean_b": 0.75, "difference": 0.5,
    }  # fmt: skip
    comparison = compare_results(read_results(runs[0]), read_results(runs[1]), key="score", top=10)
    assert {k: v for k, v in document.items() if k not in ("a", "b")} == json.loads(
        json.dumps(comparison.to_json())
    )


def test_compare_json_errors_are_one_line(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", {"e1": [r(1, 1), r(0, 1)]})
    b = run_file(tmp_path / "b.jsonl", {"e2": [r(1, 1), r(0, 1)]})
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"])
    assert result.exit_code == 3
    assert result.output.startswith("Error: cannot compare") and "{" not in result.output


LONG = "rubric_correctness_of_the_final_answer_given"


def wide_runs(tmp_path: Path) -> tuple[Path, Path]:
    def values(example: int, scale: float) -> dict[str, float]:
        return {LONG: (example + 1) * 1234.5678 * scale, "rubric_fabrication_score": -0.125}

    ids = [f"example-with-a-rather-long-identifier-{i:04d}-0123456789abcdef" for i in range(4)]
    a = run_file(
        tmp_path / "a.jsonl", {e: [values(i, 1), values(i, -1)] for i, e in enumerate(ids)}
    )
    b = run_file(tmp_path / "b.jsonl", {e: [values(i, 3), values(i, 1)] for i, e in enumerate(ids)})
    return a, b


@pytest.mark.parametrize("columns", ["80", "40"])
def test_compare_keeps_every_number_whole_on_a_narrow_terminal(
    tmp_path: Path, columns: str
) -> None:
    a, b = wide_runs(tmp_path)
    comparison = compare_results(read_results(a), read_results(b), key=LONG)
    result = CliRunner().invoke(cli, ["compare", str(a), str(b)], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "…" not in out
    for item in comparison.keys:
        low, high = item.interval
        for text in (
            f"{item.mean_a:.3f}", f"{item.mean_b:.3f}", f"{item.difference:+.3f}",
            f"[{low:+.3f}, {high:+.3f}]",
        ):  # fmt: skip
            assert text in out, (text, out)
    for change in comparison.changed_most:
        assert f"{change.mean_b:.3f}" in out and f"{change.difference:+.3f}" in out
    if columns == "80":
        assert max(len(line) for line in out.splitlines()) <= 80


def _attempt(record: dict[str, Any], attempt: int) -> dict[str, Any]:
    return {**record, "attempt": attempt, "rollout_id": f"{record['rollout_id']}-a{attempt}"}


def test_compare_files_reads_streams_as_read_results_chooses_groups(tmp_path: Path) -> None:
    """Superseded attempts, a group cut short by an interruption and a group with a line
    too many are chosen exactly as ``read_results`` chooses them."""
    records = [
        # e0: attempt 1 complete, then attempt 2 complete: attempt 2 counts.
        rollout(0, "e0", 0, rewards=r(0, 0)),
        rollout(0, "e0", 1, rewards=r(0, 0)),
        _attempt(rollout(0, "e0", 0, rewards=r(1, 1)), 2),
        _attempt(rollout(0, "e0", 1, rewards=r(1, 0.5)), 2),
        # e1: attempt 1 complete, attempt 2 cut short: attempt 1 counts.
        rollout(1, "e1", 0, rewards=r(1, 0.25)),
        rollout(1, "e1", 1, rewards=r(0, 0.25)),
        _attempt(rollout(1, "e1", 0, rewards=r(0, 0)), 2),
        # e2: a line too many after it completed: not a complete group.
        rollout(2, "e2", 0, rewards=r(1, 1)),
        rollout(2, "e2", 1, rewards=r(1, 1)),
        rollout(2, "e2", 1, rewards=r(0, 0)),
        # e3: interleaved with e4, both complete.
        rollout(3, "e3", 0, rewards=r(0, 0.5)),
        rollout(4, "e4", 1, rewards=r(1, 0.5)),
        rollout(3, "e3", 1, rewards=r(1, 0.5)),
        rollout(4, "e4", 0, rewards=r(0, 0.75)),
    ]
    a = write(tmp_path / "a.jsonl", header(group_size=2), records)
    b = run_file(tmp_path / "b.jsonl", {
        "e0": [r(1, 0.5), r(0, 0.5)],
        "e1": [r(1, 1), r(1, 1)],
        "e2": [r(0, 0), r(0, 0)],
        "e3": [r(1, 1), r(1, 0)],
        "e4": [r(0, 0), r(0, 0.25)],
    })  # fmt: skip
    whole = compare_results(read_results(a), read_results(b), resamples=200)
    streamed = compare_files(a, b, resamples=200)
    assert streamed == whole
    assert (streamed.matched, streamed.only_in_a, streamed.only_in_b) == (4, 0, 1)
    correct = streamed.keys[0]
    # A's means: e0 1.0 (attempt 2), e1 0.5 (attempt 1), e3 0.5, e4 0.5.
    assert correct.mean_a == pytest.approx(2.5 / 4)


def test_compare_files_names_the_damaged_line(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", {"e1": [r(1, 1), r(0, 1)]})
    with a.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    with pytest.raises(ResultsFileError, match=r"a\.jsonl:4"):
        compare_files(a, a)


def test_a_non_finite_reward_is_named_with_its_example(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", {"e1": [r(1, 1), r(0, 1)], "e2": [r(1, 1), r(1, 1)]})
    b = run_file(tmp_path / "b.jsonl", {"e1": [r(1, 1), r(0, 1)], "e2": [r(1, 1), r(1, 1)]})
    text = b.read_text().replace('"correct": 1', '"correct": NaN', 1)
    b.write_text(text)
    with pytest.raises(ValueError, match=r"reward 'correct' of example 'e1' in B is not a finite"):
        compare_files(a, b)
    result = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert result.exit_code == 3
    assert "example 'e1' in B is not a finite number" in result.output


def test_compare_refuses_a_line_whose_model_calls_view_refuses(tmp_path: Path) -> None:
    bad_calls = [{"finish_reason": "stop", "usage": None, "seconds": 0.1, "message_index": 1,
                  "prompt_token_ids_added": [8], "completion_token_ids": [9]}]  # fmt: skip
    records = [rollout(0, "e1", k, rewards=r(1, 1)) for k in range(2)]
    records[1]["model_calls"] = bad_calls
    a = write(tmp_path / "a.jsonl", header(group_size=2), records)
    b = run_file(tmp_path / "b.jsonl", {"e1": [r(1, 1), r(0, 0)]})
    with pytest.raises(ResultsFileError) as viewed:
        read_results(a)
    with pytest.raises(ResultsFileError) as compared:
        compare_files(a, b)
    assert str(compared.value) == str(viewed.value)
    assert f"{a}:3 is not a rollout record" in str(compared.value)
    result = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert result.exit_code != 0 and "prompt_token_ids_added" in result.output
