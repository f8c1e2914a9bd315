"""Atropos's scored group from benchmax trajectories (a plain function; imports no Atropos).

:func:`scored_data_group` returns the fields of Atropos's ``ScoredDataGroup`` TypedDict
(``atroposlib/envs/base.py``, atroposlib 0.4) for one group, one item per rollout, in the
order given (an Atropos environment's ``collect_trajectories`` can return it as is):

* ``tokens``: the training sample's ``prompt_ids + completion_ids``
* ``masks``: ``-100`` for prompt and environment-added tokens, the token id where sampled;
  all ``-100`` for a non-trainable rollout
* ``scores``: one scalar per rollout: given, else the trajectory's declared scalar
* ``inference_logprobs``: aligned with ``tokens``: ``1.0`` where the mask is ``-100``
  (Atropos's convention), else the server's logprob
* ``messages``: the rollout's transcript
* ``overrides``: ``{"set_advantage_to_zero": True}`` for a non-trainable rollout, else
  ``{}``
* ``advantages``, ``ref_logprobs``, ``generation_params``, ``group_overrides``, ``images``,
  ``distill_token_ids``, ``distill_logprobs``: ``None``

Atropos's trainer normalises ``scores`` over the whole group before applying
``set_advantage_to_zero``, so a non-trainable rollout's score still enters the group's
mean: drop it from the group to keep it out entirely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchmax.integrations._records import required_sequence, scalar_rewards
from benchmax.trajectory import Trajectory

__all__ = ["IGNORED", "scored_data_group"]

IGNORED = -100
"""Atropos's mask value for a token that is not trained on."""

_MASKED_LOGPROB = 1.0


def scored_data_group(
    trajectories: Sequence[Trajectory],
    *,
    scores: Sequence[float] | None = None,
    reward_weights: Mapping[str, float] | None = None,
) -> dict[str, object]:
    """The ``ScoredDataGroup`` fields for one group (table in the module docs).

    ``scores`` (one per trajectory) default to ``benchmax.training.scalar_reward(t.rewards,
    reward_weights)`` of each (pass the environment's ``reward_weights``; ``None``: the sum).
    ``ValueError`` when a rollout recorded no token ids or ``scores`` has the wrong length.
    """
    scalars = scalar_rewards(trajectories, scores, reward_weights, "scores")
    tokens: list[list[int]] = []
    masks: list[list[int]] = []
    logprobs: list[list[float]] = []
    for trajectory in trajectories:
        sequence = required_sequence(trajectory)
        prompt = list(sequence.prompt_ids)
        pairs = zip(sequence.completion_ids, sequence.completion_mask, strict=True)
        tokens.append(prompt + list(sequence.completion_ids))
        masks.append([IGNORED] * len(prompt) + [t if m else IGNORED for t, m in pairs])
        logprobs.append(
            [_MASKED_LOGPROB] * len(prompt)
            + [
                lp if m else _MASKED_LOGPROB
                for lp, m in zip(
                    sequence.completion_logprobs, sequence.completion_mask, strict=True
                )
            ]
        )
    return {
        "tokens": tokens,
        "masks": masks,
        "scores": scalars,
        "advantages": None,
        "ref_logprobs": None,
        "messages": [[dict(m) for m in t.messages or ()] for t in trajectories],
        "generation_params": None,
        "inference_logprobs": logprobs,
        "group_overrides": None,
        "overrides": [{} if t.trainable else {"set_advantage_to_zero": True} for t in trajectories],
        "images": None,
        "distill_token_ids": None,
        "distill_logprobs": None,
    }
