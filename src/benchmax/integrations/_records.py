"""Facts about a rollout that several trainer exporters read the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchmax.training import RolloutSequence, rollout_sequences, scalar_reward
from benchmax.trajectory import Trajectory

__all__ = ["required_sequences", "scalar_rewards", "turns_after_prompt"]


def required_sequences(trajectory: Trajectory) -> tuple[RolloutSequence, ...]:
    """The rollout's training sequences, one per branch (``rollout_sequences``);
    ``ValueError`` naming the rollout when none of its model calls recorded tokens (run
    with ``--tokens`` / ``record_tokens``)."""
    sequences = rollout_sequences(trajectory)
    if not sequences:
        raise ValueError(
            f"rollout {trajectory.rollout_id!r} has no token ids: record tokens "
            "(--tokens, RunConfig(tokens=True) or RolloutRequest(record_tokens=True))"
        )
    return sequences


def turns_after_prompt(trajectory: Trajectory) -> int:
    """Messages the rollout added after its prompt (assistant, tool and later user turns):
    the first model call's ``message_index`` is the prompt's length; 0 without calls."""
    messages = trajectory.messages or ()
    first = next(
        (call.message_index for call in trajectory.model_calls if call.message_index is not None),
        None,
    )
    return 0 if first is None else max(0, len(messages) - first)


def scalar_rewards(
    trajectories: Sequence[Trajectory],
    given: Sequence[float] | None,
    reward_weights: Mapping[str, float] | None,
    name: str,
) -> list[float]:
    """One scalar per trajectory: ``given`` (as floats), else each one's
    ``benchmax.training.scalar_reward(t.rewards, reward_weights)``; ``ValueError`` when
    ``given`` (called ``name`` in the message) has the wrong length."""
    if given is None:
        return [scalar_reward(t.rewards, reward_weights) for t in trajectories]
    if len(given) != len(trajectories):
        raise ValueError(f"got {len(given)} {name} for {len(trajectories)} trajectories")
    return [float(value) for value in given]
