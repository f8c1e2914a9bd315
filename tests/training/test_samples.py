"""to_training_samples: stitching model calls by prefix, masks, logprobs and breaks."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.training import to_training_samples
from benchmax.trajectory import ModelCall, Trajectory


def trajectory(*calls: ModelCall, reason: str = "finished") -> Trajectory:
    return Trajectory(
        rollout_id="r", example_id="e", termination_reason=reason, rewards={}, model_calls=calls
    )


def call(
    prompt: list[int], completion: list[int], logprobs: list[float] | None = None
) -> ModelCall:
    return ModelCall(
        prompt_token_ids=tuple(prompt),
        completion_token_ids=tuple(completion),
        completion_logprobs=tuple(logprobs if logprobs is not None else [-0.5] * len(completion)),
    )


def test_one_call_is_one_sample_with_every_token_sampled() -> None:
    (sample,) = to_training_samples(trajectory(call([1, 2, 3], [4, 5], [-0.1, -0.2])))
    assert sample == {
        "prompt_ids": [1, 2, 3],
        "completion_ids": [4, 5],
        "completion_mask": [1, 1],
        "completion_logprobs": [-0.1, -0.2],
    }
    assert list(sample) == [
        "prompt_ids",
        "completion_ids",
        "completion_mask",
        "completion_logprobs",
    ]


def test_tool_tokens_between_calls_have_mask_zero() -> None:
    first = call([1, 2], [3, 4], [-0.3, -0.4])
    # the tool result and the template tokens (90, 91, 92) come before the second reply
    second = call([1, 2, 3, 4, 90, 91, 92], [5], [-0.5])
    record = trajectory(first, second)
    (sample,) = to_training_samples(record)
    assert sample["prompt_ids"] == [1, 2]
    assert sample["completion_ids"] == [3, 4, 90, 91, 92, 5]
    assert sample["completion_mask"] == [1, 1, 0, 0, 0, 1]
    assert sample["completion_logprobs"] == [-0.3, -0.4, 0.0, 0.0, 0.0, -0.5]
    assert record.token_prefix_breaks == 0


def test_a_template_that_drops_earlier_reasoning_starts_a_counted_new_sample() -> None:
    think, answer = [50, 51, 52], [7]
    first = call([1, 2], [*think, *answer, 8])
    # The next prompt re-renders the first reply without its <think> block.
    second = call([1, 2, *answer, 8, 90, 91], [9, 10])
    third = call([1, 2, *answer, 8, 90, 91, 9, 10, 92], [11])
    record = trajectory(first, second, third)
    samples = to_training_samples(record)
    assert record.token_prefix_breaks == 1 and len(samples) == 2
    assert samples[0]["completion_ids"] == [*think, *answer, 8]
    assert samples[1]["prompt_ids"] == [1, 2, *answer, 8, 90, 91]
    assert samples[1]["completion_ids"] == [9, 10, 92, 11]
    assert samples[1]["completion_mask"] == [1, 1, 0, 1]
    sampled = [
        t
        for s in samples
        for t, m in zip(s["completion_ids"], s["completion_mask"], strict=True)
        if m
    ]
    assert sampled == [*think, *answer, 8, 9, 10, 11]  # every sampled token once


def test_calls_without_tokens_are_skipped_and_none_gives_no_samples() -> None:
    assert to_training_samples(trajectory(ModelCall(seconds=0.1))) == []
    assert trajectory(ModelCall()).token_prefix_breaks == 0
    failed_last = trajectory(call([1], [2]), ModelCall(seconds=1.0))
    assert len(to_training_samples(failed_last)) == 1


def test_completion_ids_without_logprobs_are_refused() -> None:
    bare = ModelCall(prompt_token_ids=(1,), completion_token_ids=(2,))
    with pytest.raises(ValueError, match="no logprobs"):
        to_training_samples(trajectory(bare))


def test_a_prompt_shorter_than_the_previous_sequence_breaks() -> None:
    record = trajectory(call([1, 2], [3]), call([1, 2], [4]))
    assert record.token_prefix_breaks == 1 and len(to_training_samples(record)) == 2


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, int]], list[float]]:
    """A server's token stream and where each call's completion sits in it."""
    tokens = st.integers(min_value=0, max_value=150_000)
    stream = draw(st.lists(tokens, min_size=1, max_size=20))
    spans: list[tuple[int, int]] = []
    logprobs: list[float] = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        if spans:  # tool results, user turns, template tokens (maybe none)
            stream += draw(st.lists(tokens, max_size=15))
        completion = draw(st.lists(tokens, min_size=0, max_size=25))
        spans.append((len(stream), len(stream) + len(completion)))
        stream += completion
        logprobs += [-float(i % 7) / 3 for i in range(len(completion))]
    return stream, spans, logprobs


@given(conversations())
def test_stitched_samples_reproduce_the_servers_token_stream(
    conversation: tuple[list[int], list[tuple[int, int]], list[float]],
) -> None:
    stream, spans, logprobs = conversation
    calls = []
    used = 0
    for start, end in spans:
        width = end - start
        calls.append(call(stream[:start], stream[start:end], logprobs[used : used + width]))
        used += width
    record = trajectory(*calls)
    (sample,) = to_training_samples(record)
    assert record.token_prefix_breaks == 0
    assert sample["prompt_ids"] + sample["completion_ids"] == stream[: spans[-1][1]]
    lengths = {len(sample[k]) for k in ("completion_ids", "completion_mask", "completion_logprobs")}
    assert len(lengths) == 1
    offset = len(sample["prompt_ids"])
    sampled = {i for start, end in spans for i in range(start - offset, end - offset)}
    assert [i for i, m in enumerate(sample["completion_mask"]) if m] == sorted(sampled)
    pairs = list(zip(sample["completion_logprobs"], sample["completion_mask"], strict=True))
    assert [lp for lp, m in pairs if m] == logprobs
    assert all(lp == 0.0 for lp, m in pairs if not m)


def reference_samples(record: Trajectory) -> list[dict[str, list[int] | list[float]]]:
    """The stitching rule written plainly, comparing every prefix in full."""
    samples: list[dict[str, list[int] | list[float]]] = []
    stream: list[int] | None = None
    for model_call in record.model_calls:
        prompt, completion = model_call.prompt_token_ids, model_call.completion_token_ids
        if prompt is None or completion is None:
            continue
        logprobs = list(model_call.completion_logprobs or ())
        if stream is not None and list(prompt[: len(stream)]) == stream:
            added = list(prompt[len(stream) :])
            samples[-1]["completion_ids"] += added + list(completion)  # type: ignore[operator]
            samples[-1]["completion_mask"] += [0] * len(added) + [1] * len(completion)  # type: ignore[operator]
            samples[-1]["completion_logprobs"] += [0.0] * len(added) + logprobs  # type: ignore[operator]
        else:
            samples.append(
                {
                    "prompt_ids": list(prompt),
                    "completion_ids": list(completion),
                    "completion_mask": [1] * len(completion),
                    "completion_logprobs": logprobs,
                }
            )
        stream = list(prompt) + list(completion)
    return samples


@st.composite
def conversations_with_breaks(draw: st.DrawFn) -> Trajectory:
    """Calls that mostly continue the previous one, some breaking the prefix anywhere
    (an edited context token, a re-rendered reply, a shorter prompt), some without tokens."""
    tokens = st.integers(min_value=0, max_value=40)  # small ids: near-misses are likely
    stream = draw(st.lists(tokens, min_size=1, max_size=12))
    calls = []
    for index in range(draw(st.integers(min_value=1, max_value=7))):
        if index:
            stream = stream + draw(st.lists(tokens, max_size=8))
        prompt = list(stream)
        kind = draw(st.sampled_from(["continue", "continue", "edit", "shorter", "no tokens"]))
        if kind == "edit" and prompt:
            at = draw(st.integers(min_value=0, max_value=len(prompt) - 1))
            prompt[at] = 41
        elif kind == "shorter" and prompt:
            prompt = prompt[: draw(st.integers(min_value=0, max_value=len(prompt) - 1))]
        completion = draw(st.lists(tokens, max_size=10))
        if kind == "no tokens":
            calls.append(ModelCall())
            continue
        calls.append(call(prompt, completion, [-0.25 * (i % 5) for i in range(len(completion))]))
        stream = prompt + completion
    return trajectory(*calls)


def read_back(record: Trajectory) -> Trajectory:
    return Trajectory.from_json(json.loads(json.dumps(record.to_json())))


@given(conversations_with_breaks())
def test_samples_match_the_plain_rule_fresh_read_back_and_pickled(record: Trajectory) -> None:
    expected = reference_samples(record)
    breaks = max(len(expected) - 1, 0)
    fresh = trajectory(*(dataclasses.replace(c) for c in record.model_calls))
    # Fresh calls compare in full; asked again they use what they settled, which
    # pickling keeps; a record read back from its results line knows it without comparing.
    assert to_training_samples(fresh) == expected
    unpickled = trajectory(*pickle.loads(pickle.dumps(fresh.model_calls)))
    for source in (fresh, fresh, read_back(record), unpickled):
        assert to_training_samples(source) == expected
        assert source.token_prefix_breaks == breaks


def test_a_settled_relation_is_not_reused_for_another_previous_call() -> None:
    first = call([1, 2], [3])
    second = call([1, 2, 3, 9], [4])
    assert second.continues(first)
    # Equal ids in other tuples: compared again, same answer; different ids: a break.
    assert second.continues(call([1, 2], [3]))
    assert not second.continues(call([1, 2], [5]))
    assert not second.continues(call([7, 2], [3]))
    assert second.continues(first)
    # The record's other views agree whichever previous call was asked last.
    assert trajectory(call([1, 2], [5]), second).token_prefix_breaks == 1
    assert trajectory(first, second).token_prefix_breaks == 0
    # ``replace`` may change the ids, so the copy settles afresh.
    edited = dataclasses.replace(second, prompt_token_ids=(1, 2, 8, 9))
    assert not edited.continues(first)
    assert edited != second and dataclasses.replace(second) == second
