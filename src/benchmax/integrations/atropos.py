"""Atropos's scored group from benchmax trajectories (a plain function; imports no Atropos).

:func:`scored_data_group` returns the fields of Atropos's ``ScoredDataGroup`` TypedDict
(``atroposlib/envs/base.py``, atroposlib 0.4) for one group, one item per branch of each
rollout (one per rollout when every rollout's calls stitch into one sequence), in the
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
* ``advantages``: ``None`` when every rollout has one branch; else per item, per token,
  its rollout's GRPO advantage over the group's trainable rollouts (each counted once;
  ``benchmax.training.group_advantages``), 0 for a non-trainable rollout
* ``ref_logprobs``, ``generation_params``, ``group_overrides``, ``images``,
  ``distill_token_ids``, ``distill_logprobs``: ``None``

A rollout whose model calls did not stitch into one sequence (``benchmax.stitching``:
re-rendered history, parallel subagents, retries) has several branches: each is an item
with the rollout's score and transcript, so every sampled token is trained; the
``advantages`` field then carries each rollout's advantage computed with one score per
rollout, since normalising the scores over the items would count such a rollout several
times.

Atropos's trainer normalises ``scores`` over the whole group before applying
``set_advantage_to_zero``, so a non-trainable rollout's score still enters the group's
mean: drop it from the group to keep it out entirely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchmax.integrations._records import required_sequences, scalar_rewards
from benchmax.training import group_advantages
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
    per_rollout = [required_sequences(trajectory) for trajectory in trajectories]
    owners = [i for i, sequences in enumerate(per_rollout) for _ in sequences]
    tokens: list[list[int]] = []
    masks: list[list[int]] = []
    logprobs: list[list[float]] = []
    for sequence in (sequence for built in per_rollout for sequence in built):
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
    advantages = None
    if len(owners) != len(trajectories):
        per_owner = _rollout_advantages(trajectories, scalars)
        advantages = [[per_owner[i]] * len(item) for i, item in zip(owners, tokens, strict=True)]
    return {
        "tokens": tokens,
        "masks": masks,
        "scores": [scalars[i] for i in owners],
        "advantages": advantages,
        "ref_logprobs": None,
        "messages": [[dict(m) for m in trajectories[i].messages or ()] for i in owners],
        "generation_params": None,
        "inference_logprobs": logprobs,
        "group_overrides": None,
        "overrides": [
            {} if trajectories[i].trainable else {"set_advantage_to_zero": True} for i in owners
        ],
        "images": None,
        "distill_token_ids": None,
        "distill_logprobs": None,
    }


def _rollout_advantages(trajectories: Sequence[Trajectory], scalars: list[float]) -> list[float]:
    """Each rollout's GRPO advantage over the group's trainable rollouts (0 for the rest)."""
    trainable = [i for i, t in enumerate(trajectories) if t.trainable]
    advantages = [0.0] * len(trajectories)
    if trainable:
        values = group_advantages([scalars[i] for i in trainable], "grpo")
        for index, value in zip(trainable, values, strict=True):
            advantages[index] = value
    return advantages
