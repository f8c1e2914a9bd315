"""verl's agent-loop record from a benchmax trajectory (a plain function; imports no verl).

:func:`agent_loop_output` returns the fields of verl's ``AgentLoopOutput``
(``verl/experimental/agent_loop/agent_loop.py``, verl 0.9), ready for
``AgentLoopOutput(**fields)`` in a custom ``AgentLoopBase.run``:

* ``prompt_ids``: the rollout's training sample ``prompt_ids`` (first call's prompt)
* ``response_ids``: ``completion_ids``: sampled tokens and the tokens the environment added
* ``response_mask``: ``completion_mask``: 1 sampled, 0 added; all 0 for a non-trainable
  rollout
* ``response_logprobs``: ``completion_logprobs`` (0.0 at added tokens)
* ``reward_score``: the scalar reward given, else the trajectory's declared scalar
* ``num_turns``: messages after the prompt + 1 (verl counts user, assistant and tool turns)
* ``metrics``: ``generate_sequences``/``tool_calls``/``compute_score``: model, tool and
  reward seconds; ``num_preempted`` -1 (unknown)
* ``extra_fields``: ``rollout_id``, ``example_id``, ``termination_reason``, ``trainable``,
  ``token_prefix_breaks``, ``rewards``, and the branch: ``branch`` (its index),
  ``branches`` (the rollout's count) and ``branch_began`` (why it began)

A rollout whose model calls did not stitch into one sequence has several branches
(``benchmax.stitching``: re-rendered history, parallel subagents, retries), each its own
training sequence: :func:`agent_loop_outputs` returns one record per branch, each with the
rollout's ``reward_score``, so every sampled token is trained; :func:`agent_loop_output`
returns the one record of a single-branch rollout and refuses (``ValueError``) a rollout
with several rather than dropping any. verl's GRPO baseline groups rows by their uid: give
the branches of one rollout one row's weight (or filter ``branch`` to the last) if each
rollout should count once in its group's statistics.
verl computes its group advantages from ``reward_score`` itself, so a non-trainable rollout
still counts in its group's baseline: drop rows with ``extra_fields["trainable"]`` false
before grouping to keep it out entirely.
"""

from __future__ import annotations

from collections.abc import Mapping

from benchmax.integrations._records import required_sequences, turns_after_prompt
from benchmax.training import RolloutSequence, scalar_reward
from benchmax.trajectory import Trajectory

__all__ = ["agent_loop_output", "agent_loop_outputs"]


def agent_loop_output(
    trajectory: Trajectory,
    *,
    reward_score: float | None = None,
    reward_weights: Mapping[str, float] | None = None,
) -> dict[str, object]:
    """The ``AgentLoopOutput`` fields of a rollout with one branch (table in the module
    docs). ``reward_score`` defaults to ``benchmax.training.scalar_reward(
    trajectory.rewards, reward_weights)`` (pass the environment's ``reward_weights``;
    ``None``: the sum). ``ValueError`` when the rollout recorded no token ids, or has
    several branches (use :func:`agent_loop_outputs`).
    """
    outputs = agent_loop_outputs(
        trajectory, reward_score=reward_score, reward_weights=reward_weights
    )
    if len(outputs) > 1:
        raise ValueError(
            f"rollout {trajectory.rollout_id!r} has {len(outputs)} branches (its model calls "
            "do not stitch into one sequence): use agent_loop_outputs, which returns each"
        )
    return outputs[0]


def agent_loop_outputs(
    trajectory: Trajectory,
    *,
    reward_score: float | None = None,
    reward_weights: Mapping[str, float] | None = None,
) -> list[dict[str, object]]:
    """The ``AgentLoopOutput`` fields of every branch of a rollout, in the order they
    began, each with the rollout's ``reward_score`` (see :func:`agent_loop_output`).
    ``ValueError`` when the rollout recorded no token ids."""
    sequences = required_sequences(trajectory)
    score = (
        scalar_reward(trajectory.rewards, reward_weights) if reward_score is None else reward_score
    )
    return [
        _output(trajectory, sequence, score, index, len(sequences))
        for index, sequence in enumerate(sequences)
    ]


def _output(
    trajectory: Trajectory, sequence: RolloutSequence, score: float, branch: int, branches: int
) -> dict[str, object]:
    timings = trajectory.timings
    return {
        "prompt_ids": list(sequence.prompt_ids),
        "response_ids": list(sequence.completion_ids),
        "response_mask": list(sequence.completion_mask),
        "response_logprobs": list(sequence.completion_logprobs),
        "reward_score": score,
        "num_turns": turns_after_prompt(trajectory) + 1,
        "metrics": {
            "generate_sequences": float(timings.get("model_seconds", 0.0)),
            "tool_calls": float(timings.get("tool_seconds", 0.0)),
            "compute_score": float(timings.get("reward_seconds", 0.0)),
            "num_preempted": -1,
        },
        "extra_fields": {
            "rollout_id": trajectory.rollout_id,
            "example_id": trajectory.example_id,
            "termination_reason": trajectory.termination_reason,
            "trainable": sequence.trainable,
            "token_prefix_breaks": trajectory.token_prefix_breaks,
            "rewards": dict(trajectory.rewards),
            "branch": branch,
            "branches": branches,
            "branch_began": sequence.began,
        },
    }
