"""``TrajectoryGroup``: one finished group, the unit a run records and a trainer learns from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from benchmax._value_checks import is_finite_number, is_non_empty_str
from benchmax._vocabulary import TokenUsage
from benchmax.envs import RolloutOutcome
from benchmax.results._advantages import AdvantageMethod, group_advantages, scalar_reward
from benchmax.trajectory import Trajectory

__all__ = ["TrajectoryGroup"]


@dataclass(frozen=True, slots=True)
class TrajectoryGroup:
    """The rollouts of one finished group, as ``Trajectory`` records in group order.

    Everything else is derived from the records, which already carry their run, example,
    attempt and place in the group: ``example_id``/``example_index``, ``rewards``,
    ``termination_reasons``, ``usage`` and ``outcomes`` (what ``run_group`` returned, keyed
    by rollout id). ``reward_weights`` are the environment's ``reward_weights`` when it
    sets them (``None``: every key weighs 1.0); they decide ``scalar_rewards`` and
    ``advantages``.

    The group pipeline hands one back for every group it runs (``collect_group`` returns
    it; ``run_environment`` appends it to the results file through ``ResultsStore.append``),
    and ``groups_of`` reads them back from a results file.

    Raises ``ValueError`` for an empty group, ``TypeError`` when ``trajectories`` is not a
    tuple of ``Trajectory`` or a weight is not a finite number keyed by a reward name.
    """

    trajectories: tuple[Trajectory, ...]
    reward_weights: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        given: object = self.trajectories
        if not isinstance(given, tuple):
            kind = type(given).__name__
            raise TypeError(f"trajectories must be a tuple of Trajectory, got {kind}")
        if not self.trajectories:
            raise ValueError("a TrajectoryGroup holds at least one trajectory")
        for position, trajectory in enumerate(self.trajectories):
            if not isinstance(trajectory, Trajectory):
                raise TypeError(
                    f"trajectories[{position}] must be a Trajectory, "
                    f"got {type(trajectory).__name__}"
                )
        if self.reward_weights is not None:
            if not isinstance(self.reward_weights, Mapping):
                raise TypeError("reward_weights must be a mapping of reward key to number or None")
            for key, weight in self.reward_weights.items():
                if not is_non_empty_str(key) or not is_finite_number(weight):
                    raise TypeError(
                        f"reward weight {key!r} must be a finite number, got {weight!r}"
                    )
            object.__setattr__(self, "reward_weights", dict(self.reward_weights))

    def __len__(self) -> int:
        return len(self.trajectories)

    @property
    def example_id(self) -> str:
        """The example every rollout of the group ran."""
        return self.trajectories[0].example_id

    @property
    def example_index(self) -> int | None:
        """The example's place in its split (``None`` outside a run, e.g. ``collect_group``)."""
        return self.trajectories[0].example_index

    @property
    def termination_reasons(self) -> tuple[str, ...]:
        return tuple(t.termination_reason for t in self.trajectories)

    @property
    def rewards(self) -> tuple[Mapping[str, float], ...]:
        return tuple(t.rewards for t in self.trajectories)

    @property
    def usage(self) -> tuple[TokenUsage | None, ...]:
        """Each rollout's token usage summed over its model calls (``None``: not recorded)."""
        return tuple(t.usage for t in self.trajectories)

    @property
    def outcomes(self) -> Mapping[str, RolloutOutcome]:
        """Rollout id -> ``RolloutOutcome`` (rewards and termination reason), in group order."""
        return {
            t.rollout_id: RolloutOutcome(
                rewards=dict(t.rewards), termination_reason=t.termination_reason
            )
            for t in self.trajectories
        }

    def values(self, key: str) -> list[float]:
        """The group's values of reward ``key`` (rollouts without it are skipped)."""
        return [float(t.rewards[key]) for t in self.trajectories if key in t.rewards]

    def scalars(self, weights: Mapping[str, float] | None = None) -> tuple[float, ...]:
        """One scalar reward per rollout: ``scalar_reward(rewards, weights)``.

        ``weights`` default to the group's ``reward_weights``. Raises ``ValueError`` as
        ``scalar_reward`` does (a weighted key missing, a non-finite value).
        """
        chosen = self.reward_weights if weights is None else weights
        return tuple(scalar_reward(t.rewards, chosen) for t in self.trajectories)

    @property
    def scalar_rewards(self) -> tuple[float, ...]:
        """``scalars()`` by the group's own ``reward_weights``."""
        return self.scalars()

    def advantages(
        self, method: AdvantageMethod = "grpo", weights: Mapping[str, float] | None = None
    ) -> list[float]:
        """One advantage per trajectory (``group_advantages`` of the scalars), computed over
        the trainable ones only.

        Non-trainable rollouts (``Trajectory.trainable`` is false: operational failures)
        get 0.0 and should be masked out of the loss; their zero rewards do not move the
        group's baseline. All zeros when no rollout is trainable.
        """
        kept = [i for i, t in enumerate(self.trajectories) if t.trainable]
        advantages = [0.0] * len(self.trajectories)
        if kept:
            scalars = self.scalars(weights)
            values = group_advantages([scalars[i] for i in kept], method)
            for i, value in zip(kept, values, strict=True):
                advantages[i] = value
        return advantages
