"""benchmax.stitching: model calls as branches (graph stitching), and token coverage."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.stitching import Branch, BranchCoverage, TokenCoverage, stitch_branches
from benchmax.training import to_training_samples
from benchmax.trajectory import ModelCall, Trajectory


def call(prompt: list[int], completion: list[int]) -> ModelCall:
    return ModelCall(
        prompt_token_ids=tuple(prompt),
        completion_token_ids=tuple(completion),
        completion_logprobs=tuple(-0.25 for _ in completion),
    )


def rollout(*calls: ModelCall) -> Trajectory:
    return Trajectory(
        rollout_id="r", example_id="e", termination_reason="finished", rewards={}, model_calls=calls
    )


def shape(branches: tuple[Branch, ...]) -> list[tuple[str, tuple[int, ...]]]:
    return [(b.began, b.calls) for b in branches]


def test_a_chained_conversation_is_one_branch() -> None:
    calls = [call([1, 2], [3]), call([1, 2, 3, 9], [4, 5]), call([1, 2, 3, 9, 4, 5, 9], [6])]
    (branch,) = stitch_branches(calls)
    assert branch == Branch("first", (0, 1, 2), 4)


def test_re_rendered_history_begins_a_branch() -> None:
    # the template dropped the first reply's reasoning token 3 when rendering turn 2
    calls = [call([1, 2], [3, 4]), call([1, 2, 4, 9], [5]), call([1, 2, 4, 9, 5, 9], [6])]
    assert shape(stitch_branches(calls)) == [("first", (0,)), ("history_rewritten", (1, 2))]


def test_interleaved_parallel_chains_continue_their_own_tips() -> None:
    a1, b1 = call([1, 10], [11]), call([1, 20], [21])
    a2, b2 = call([1, 10, 11, 0], [12]), call([1, 20, 21, 0], [22])
    a3 = call([1, 10, 11, 0, 12, 0], [13])
    branches = stitch_branches([a1, b1, a2, b2, a3])
    assert shape(branches) == [("first", (0, 2, 4)), ("history_rewritten", (1, 3))]
    assert sum(b.sampled_tokens for b in branches) == 5


def test_a_retried_request_begins_a_retry_branch() -> None:
    calls = [call([1, 2], [3]), call([1, 2, 3, 0], [4]), call([1, 2, 3, 0], [5]), call([1, 2], [6])]
    assert shape(stitch_branches(calls)) == [
        ("first", (0, 1)),
        ("retry", (2,)),
        ("retry", (3,)),
    ]


def test_going_on_from_a_continued_call_is_a_fork() -> None:
    root = call([1, 2], [3])
    calls = [root, call([1, 2, 3, 7], [4]), call([1, 2, 3, 8], [5]), call([1, 2, 3, 8, 5, 0], [6])]
    assert shape(stitch_branches(calls)) == [("first", (0, 1)), ("fork", (2, 3))]


def test_calls_without_tokens_belong_to_no_branch() -> None:
    assert stitch_branches([ModelCall(), ModelCall(finish_reason="stop")]) == ()
    calls = [ModelCall(), call([1], [2]), ModelCall(), call([1, 2, 0], [3])]
    assert shape(stitch_branches(calls)) == [("first", (1, 3))]


def test_coverage_is_on_the_results_line_and_reads_back() -> None:
    record = rollout(call([1, 2], [3, 4]), call([1, 2, 4, 9], [5]))
    line = json.loads(json.dumps(record.to_json()))
    assert line["coverage"] == {
        "sampled_tokens": 3,
        "trained_tokens": 3,
        "branches": [
            {"began": "first", "calls": 1, "sampled_tokens": 2},
            {"began": "history_rewritten", "calls": 1, "sampled_tokens": 1},
        ],
    }
    coverage = TokenCoverage.from_json(line["coverage"])
    assert coverage == record.coverage
    assert coverage is not None and coverage.share == 1.0
    assert Trajectory.from_json(line) == record


def test_no_coverage_without_token_ids_and_old_lines_read() -> None:
    record = rollout(ModelCall(finish_reason="stop"))
    assert record.coverage is None
    assert "coverage" not in record.to_json()
    assert TokenCoverage.from_json(None) is None
    assert TokenCoverage.from_json({"sampled_tokens": "x"}) is None
    assert (
        TokenCoverage.from_json({"sampled_tokens": 1, "trained_tokens": 1, "branches": [{}]})
        is None
    )


def test_coverage_counts_a_sampled_completion_no_sample_can_hold() -> None:
    calls = (ModelCall(completion_token_ids=(5, 6), completion_logprobs=(-1.0, -1.0)),)
    coverage = rollout(*calls, call([1], [2])).coverage
    assert coverage == TokenCoverage(3, 1, (BranchCoverage("first", 1, 1),))
    assert coverage.lost_tokens == 2


def test_coverage_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="exceeds sampled_tokens"):
        TokenCoverage(1, 2)
    with pytest.raises(ValueError, match="non-negative"):
        TokenCoverage(-1, 0)
    with pytest.raises(ValueError, match="began"):
        BranchCoverage("later", 1, 1)  # type: ignore[arg-type]


tokens = st.lists(st.integers(0, 3), max_size=4)


@given(st.lists(st.tuples(st.integers(0, 8), tokens, tokens), min_size=1, max_size=8))
def test_every_sampled_token_is_in_exactly_one_sample(
    steps: list[tuple[int, list[int], list[int]]],
) -> None:
    """Random graphs: each call extends (or cuts) some earlier call's context; the samples
    hold each call's completion once, with mask 1 and its logprob."""
    calls: list[ModelCall] = []
    for back, added, completion in steps:
        if calls and back:
            base = calls[back % len(calls)]
            context = [*(base.prompt_token_ids or ()), *(base.completion_token_ids or ())]
            prompt = context[: len(context) - back % 3] + added
        else:
            prompt = added
        calls.append(call(prompt, completion))
    record = rollout(*calls)
    samples = to_training_samples(record)
    assert len(samples) == len(record.branches) == record.token_prefix_breaks + 1
    trained = sum(sum(sample["completion_mask"]) for sample in samples)
    assert trained == sum(len(c.completion_token_ids or ()) for c in calls)
    assert record.coverage is not None and record.coverage.share == 1.0
    for branch, sample in zip(record.branches, samples, strict=True):
        assert sample["prompt_ids"] == list(calls[branch.calls[0]].prompt_token_ids or ())
        pairs = zip(sample["completion_ids"], sample["completion_mask"], strict=True)
        sampled = [t for t, m in pairs if m]
        assert sampled == [t for i in branch.calls for t in (calls[i].completion_token_ids or ())]
