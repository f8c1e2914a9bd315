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
    """The trajectory's model calls stitched into training samples (pure; no tokenizer).

    Model calls with token ids are taken in order. A call whose prompt ids start with the
    previous call's prompt + completion ids continues that call's sample: the prompt ids
    past that prefix (what the environment added) join the completion with mask 0, then
    the call's own completion with mask 1. A call whose prompt does not (a chat template
    that dropped earlier reasoning, re-tokenization drift) starts a new sample; the
    trajectory counts these as ``token_prefix_breaks``, so ``len(samples) ==
    token_prefix_breaks + 1`` when any call recorded tokens. Calls without token ids are
    skipped; a trajectory without tokens gives ``[]``.

    Every sampled token appears exactly once, with mask 1 and its logprob. Whether to
    learn from the trajectory at all is ``trajectory.trainable``.

    Raises ``ValueError`` when a call has completion ids but no logprobs (a sample never
    carries made-up logprobs).
    """
    samples: list[TrainingSample] = []
    previous: ModelCall | None = None
    current: TrainingSample | None = None
    for call in trajectory.model_calls:
        prompt, completion = call.prompt_token_ids, call.completion_token_ids
        if prompt is None or completion is None:
            continue
        logprobs = call.completion_logprobs
        if logprobs is None:
            raise ValueError(
                f"rollout {trajectory.rollout_id}: a model call has completion token ids "
                "but no logprobs"
            )
        if current is not None and previous is not None and call.continues(previous):
            assert previous.prompt_token_ids is not None
            assert previous.completion_token_ids is not None
            start = len(previous.prompt_token_ids) + len(previous.completion_token_ids)
            added = len(prompt) - start
            current["completion_ids"] += prompt[start:]
            current["completion_ids"] += completion
            current["completion_mask"] += [0] * added
            current["completion_mask"] += [1] * len(completion)
            current["completion_logprobs"] += [0.0] * added
            current["completion_logprobs"] += logprobs
        else:
            current = {
                "prompt_ids": list(prompt),
                "completion_ids": list(completion),
                "completion_mask": [1] * len(completion),
                "completion_logprobs": list(logprobs),
            }
            samples.append(current)
        previous = call
    return samples
