"""Whether the steps of a run can learn anything: no silent nothing.

A GRPO step learns from the reward differences inside each group. :class:`LearningWatch`
reads each step's ``metrics.jsonl`` line and says two things a run must not keep quiet:

* every group of :data:`ZERO_VARIANCE_STEPS` consecutive steps had zero reward variance
  (all its rollouts scored alike): the advantages are all zero, the weights do not move.
  A warning, once per such streak;
* every rollout of :data:`FAILED_STEPS` consecutive steps failed operationally (none
  trainable: ``model_error``, ``environment_error``, ``reward_error``, ...), or of every
  step this invocation ran when it runs fewer: no step can learn, and the run stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FAILED_STEPS", "ZERO_VARIANCE_STEPS", "LearningWatch", "StepVerdict"]

ZERO_VARIANCE_STEPS = 3
"""Consecutive steps with every group at zero reward variance before the warning."""

FAILED_STEPS = 3
"""Consecutive steps whose every rollout failed operationally before the run stops."""


@dataclass(frozen=True, slots=True)
class StepVerdict:
    """What a step's line says: ``warning`` (one line, or ``None``) and ``failure`` (why
    no step can learn, one line; ``None`` while some can)."""

    warning: str | None = None
    failure: str | None = None


class LearningWatch:
    """Reads the metrics lines of a run's steps in order (module docs). ``steps_to_run``
    is how many steps this invocation trains (a shorter run stops on all of them
    failing); ``output_dir`` is named in the messages."""

    def __init__(self, *, steps_to_run: int, output_dir: str) -> None:
        self._failed_limit = max(1, min(FAILED_STEPS, steps_to_run))
        self._output = output_dir
        self._flat_since: int | None = None
        self._warned = False
        self._failed_since: int | None = None
        self._failed_reasons: dict[str, int] = {}

    def observe(self, line: Mapping[str, object]) -> StepVerdict:
        """The verdict after step ``line["step"]`` (its ``zero_variance_group_share``,
        ``non_trainable_share`` and ``termination_reasons``)."""
        step = int(str(line.get("step", 0)))
        failed = line.get("non_trainable_share") == 1.0
        if failed:
            if self._failed_since is None:
                self._failed_since, self._failed_reasons = step, {}
            reasons = line.get("termination_reasons")
            for reason, count in (reasons if isinstance(reasons, Mapping) else {}).items():
                self._failed_reasons[str(reason)] = self._failed_reasons.get(str(reason), 0) + int(
                    count
                )
            if step - self._failed_since + 1 >= self._failed_limit:
                return StepVerdict(failure=self._failure(step))
        else:
            self._failed_since = None
        flat = line.get("zero_variance_group_share") == 1.0 and not failed
        if not flat:
            self._flat_since, self._warned = None, False
            return StepVerdict()
        if self._flat_since is None:
            self._flat_since = step
        if self._warned or step - self._flat_since + 1 < ZERO_VARIANCE_STEPS:
            return StepVerdict()
        self._warned = True
        return StepVerdict(
            warning=(
                f"warning: every group of steps {_span(self._flat_since, step)} gave all its "
                "rollouts the same reward (zero variance), so GRPO learned nothing from them: "
                "make the task easier or the groups larger (-k), raise --temperature, or check "
                f"the rewards (benchmax view {self._output})"
            )
        )

    def _failure(self, step: int) -> str:
        assert self._failed_since is not None
        reasons = ", ".join(
            f"{reason} {count}" for reason, count in sorted(self._failed_reasons.items())
        )
        return (
            f"no step can learn: every rollout of steps {_span(self._failed_since, step)} "
            f"failed operationally ({reasons}); fix the cause (benchmax show "
            f"{self._output}/rollouts.jsonl), then resume with --resume"
        )


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"
