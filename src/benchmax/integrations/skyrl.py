"""SkyRL's generator output from benchmax trajectories (a plain function).

:func:`generator_output` returns the fields of SkyRL's ``GeneratorOutput`` TypedDict
(``skyrl/train/generators/base.py``, skyrl 0.4) for a batch of rollouts, one row per
branch of each rollout (one row per rollout when every rollout's calls stitch into one
sequence), in the order given (a custom ``GeneratorInterface.generate`` returns it as is):

* ``prompt_token_ids``: the training sample's ``prompt_ids``
* ``response_ids``: ``completion_ids`` (sampled and environment-added tokens)
* ``rewards``: one scalar per rollout: given, else the trajectory's declared scalar
* ``loss_masks``: ``completion_mask``: 1 sampled, 0 added; all 0 for a non-trainable rollout
* ``stop_reasons``: the last model call's ``finish_reason`` (``"stop"``, ``"length"``...),
  else the termination reason
* ``rollout_logprobs``: ``completion_logprobs`` (0.0 at added tokens)
* ``trajectory_ids``: SkyRL's own ``TrajectoryID(instance_id=example_id,
  repetition_id=group_index)`` objects (its trainer reads ``.instance_id`` and
  ``.to_string()``); imported from ``skyrl.train.generators.base`` when the function is
  called, so importing this module needs no SkyRL. Without SkyRL installed they are plain
  dicts with the same two keys.
* ``trajectory_generation_times``: model + tool + reward seconds
* ``trajectory_time_splits``: ``{"llm": model seconds, "env": tool + reward seconds}``
* ``rollout_metrics``, ``env_metrics``: ``None`` / per row ``{"termination_reason",
  "trainable", "token_prefix_breaks", "branch", "branches", "branch_began"}``
* ``is_last_step``: ``None`` when every rollout has one branch; else per row whether it is
  its rollout's last branch
* other fields (experts, sample support, images): ``None``

A rollout whose model calls did not stitch into one sequence (``benchmax.stitching``:
re-rendered history, parallel subagents, retries) has several branches: each is a row with
the rollout's reward and ``trajectory_ids`` entry, so every sampled token is trained, and
``is_last_step`` marks the rollout's last row the way SkyRL's step-wise trajectories do
(advantages computed on the last step are given to the trajectory's earlier steps): train
such batches in SkyRL's step-wise mode so each rollout counts once in its group.

SkyRL's ``apply_overlong_filtering`` zeroes the mask of rows whose stop reason is not
``"stop"``; a non-trainable rollout's mask is already zero, but its reward still enters
its group's baseline: filter on ``env_metrics[i]["trainable"]`` to drop it entirely.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence

from benchmax.integrations._records import required_sequences, scalar_rewards
from benchmax.trajectory import Trajectory

__all__ = ["generator_output"]


def generator_output(
    trajectories: Sequence[Trajectory],
    *,
    rewards: Sequence[float] | None = None,
    reward_weights: Mapping[str, float] | None = None,
) -> dict[str, object]:
    """The ``GeneratorOutput`` fields for ``trajectories`` (table in the module docs).

    ``rewards`` (one per trajectory) default to ``benchmax.training.scalar_reward(t.rewards,
    reward_weights)`` of each (pass the environment's ``reward_weights``; ``None``: the sum).
    ``ValueError`` when a rollout recorded no token ids or ``rewards`` has the wrong length.
    """
    scalars = scalar_rewards(trajectories, rewards, reward_weights, "rewards")
    per_rollout = [required_sequences(trajectory) for trajectory in trajectories]
    owners = [i for i, sequences in enumerate(per_rollout) for _ in sequences]
    sequences = [sequence for built in per_rollout for sequence in built]
    branch = [(i, len(built)) for built in per_rollout for i in range(len(built))]
    seconds = [_seconds(trajectories[i]) for i in owners]
    ids = _trajectory_ids(trajectories)
    return {
        "prompt_token_ids": [list(s.prompt_ids) for s in sequences],
        "response_ids": [list(s.completion_ids) for s in sequences],
        "rewards": [scalars[i] for i in owners],
        "loss_masks": [list(s.completion_mask) for s in sequences],
        "stop_reasons": [_stop_reason(trajectories[i]) for i in owners],
        "rollout_metrics": None,
        "rollout_logprobs": [list(s.completion_logprobs) for s in sequences],
        "trajectory_ids": [ids[i] for i in owners],
        "trajectory_generation_times": [model + env for model, env in seconds],
        "trajectory_time_splits": {
            "llm": [model for model, _ in seconds],
            "env": [env for _, env in seconds],
        },
        "rollout_expert_indices": None,
        "rollout_sample_support": None,
        "is_last_step": (
            None if len(sequences) == len(trajectories) else [i + 1 == n for i, n in branch]
        ),
        "env_metrics": [
            {
                "termination_reason": trajectories[owner].termination_reason,
                "trainable": s.trainable,
                "token_prefix_breaks": trajectories[owner].token_prefix_breaks,
                "branch": index,
                "branches": count,
                "branch_began": s.began,
            }
            for owner, s, (index, count) in zip(owners, sequences, branch, strict=True)
        ],
        "pixel_values": None,
        "image_grid_thw": None,
    }


def _trajectory_ids(trajectories: Sequence[Trajectory]) -> list[object]:
    try:
        base = importlib.import_module("skyrl.train.generators.base")
    except ImportError:
        return [{"instance_id": t.example_id, "repetition_id": t.group_index} for t in trajectories]
    make = base.TrajectoryID
    return [make(instance_id=t.example_id, repetition_id=t.group_index) for t in trajectories]


def _stop_reason(trajectory: Trajectory) -> str:
    for call in reversed(trajectory.model_calls):
        if call.finish_reason is not None:
            return call.finish_reason
    return trajectory.termination_reason


def _seconds(trajectory: Trajectory) -> tuple[float, float]:
    timings = trajectory.timings
    model = float(timings.get("model_seconds", 0.0))
    env = float(timings.get("tool_seconds", 0.0)) + float(timings.get("reward_seconds", 0.0))
    return model, env
