"""Training samples from a trajectory's recorded tokens: prompt, completion, mask, logprobs."""

from __future__ import annotations

from typing import TypedDict

from benchmax.trajectory import ModelCall, Trajectory

__all__ = ["TrainingSample", "to_training_samples"]


class TrainingSample(TypedDict):
    """One training sequence: ``prompt_ids + completion_ids`` is what the model saw and
    wrote, token for token as the server tokenized and sampled it.

    ``completion_mask[i]`` is 1 where ``completion_ids[i]`` was sampled by the model (its
    ``completion_logprobs[i]`` is the logprob the server returned) and 0 where the
    environment added it between model calls (tool results, later user turns, chat
    template tokens; logprob 0.0). The three completion lists have equal length.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    completion_logprobs: list[float]


def to_training_samples(trajectory: Trajectory) -> list[TrainingSample]:
    """The trajectory's model calls stitched into training samples, one per branch of
    ``trajectory.branches``, in the order the branches began (pure; no tokenizer).

    A branch is a chain of calls, each one's prompt ids starting with the previous one's
    prompt + completion ids (``benchmax.stitching``): its sample is the first call's
    prompt, then for each call the prompt ids past that prefix (what the environment
    added) with mask 0 and the call's own completion with mask 1. A call that extends no
    chain (a chat template that re-rendered earlier turns, an edited history, a fork, a
    retry) begins a new branch, so ``len(samples) == trajectory.token_prefix_breaks + 1``
    when any call recorded tokens, and every sampled token appears in exactly one sample,
    with mask 1 and its logprob. Calls without token ids are skipped; a trajectory
    without tokens gives ``[]``. Whether to learn from the trajectory at all is
    ``trajectory.trainable``.

    Time linear in the tokens each call added (plus the prompt of each branch's first
    call), when the calls settled their continuation as ``BaseEnv`` and a results line do.

    Raises ``ValueError`` when a call has completion ids but no logprobs (a sample never
    carries made-up logprobs).
    """
    calls = trajectory.model_calls
    for call in calls:
        if call.has_tokens and call.completion_logprobs is None:
            raise ValueError(
                f"rollout {trajectory.rollout_id}: a model call has completion token ids "
                "but no logprobs"
            )
    return [_stitched([calls[i] for i in branch.calls]) for branch in trajectory.branches]


def _stitched(run: list[ModelCall]) -> TrainingSample:
    """One sample from calls that each continue the one before (checked by the caller).

    The lists are allocated once at their final size and filled by slice assignment: time
    linear in the tokens each call added, however long the context (growing them call by
    call would copy the whole context again and again)."""
    prompt = run[0].prompt_token_ids
    last = run[-1]
    assert prompt is not None and last.prompt_token_ids is not None
    if len(run) == 1:  # copies straight from the tuples: one pass instead of two
        assert last.completion_token_ids is not None and last.completion_logprobs is not None
        return {
            "prompt_ids": list(prompt),
            "completion_ids": list(last.completion_token_ids),
            "completion_mask": [1] * len(last.completion_token_ids),
            "completion_logprobs": list(last.completion_logprobs),
        }
    assert last.completion_token_ids is not None
    length = len(last.prompt_token_ids) + len(last.completion_token_ids) - len(prompt)
    ids = [0] * length
    mask = [1] * length
    logprobs = [0.0] * length
    # ``at``: how much of the completion lists is filled; the stitched stream so far is
    # ``prompt`` + those ``at`` ids, which the next call's prompt starts with.
    at = 0
    for call in run:
        call_prompt, completion = call.prompt_token_ids, call.completion_token_ids
        assert call_prompt is not None and completion is not None
        assert call.completion_logprobs is not None
        added = len(call_prompt) - len(prompt) - at
        if added:
            ids[at : at + added] = call_prompt[len(prompt) + at :]
            mask[at : at + added] = [0] * added
            at += added
        end = at + len(completion)
        ids[at:end] = completion
        logprobs[at:end] = call.completion_logprobs
        at = end
    return {
        "prompt_ids": list(prompt),
        "completion_ids": ids,
        "completion_mask": mask,
        "completion_logprobs": logprobs,
    }
