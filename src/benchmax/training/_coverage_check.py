"""A training step's token coverage: the share of sampled tokens the trainer was handed.

``benchmax train`` measures it from what its ``RolloutFunc`` returned to TRL (the
``benchmax_coverage`` field: per rollout, the tokens its model calls sampled and those the
returned rows train), writes it to ``metrics.jsonl`` as ``token_coverage`` and stops the
run when it falls below ``--min-token-coverage``, naming the cause and the rollout that
lost the largest share. Non-trainable rollouts count for neither side (their tokens are
left out on purpose).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from benchmax.training._trl_rollouts import COVERAGE_KEY
from benchmax.trajectory import Trajectory

__all__ = ["StepCoverage"]


@dataclass(frozen=True, slots=True)
class StepCoverage:
    """One step's sampled and trained tokens, and the rollout that lost the largest share
    (``worst``: its id, sampled and trained tokens; ``None`` when none lost any)."""

    sampled_tokens: int
    trained_tokens: int
    worst: tuple[str, int, int] | None

    @classmethod
    def of(cls, output: Mapping[str, Sequence[object]]) -> StepCoverage:
        """The coverage of one ``RolloutFunc`` call's ``output``."""
        sampled = trained = 0
        worst: tuple[str, int, int] | None = None
        for rollout_id, counts in zip(output["rollout_id"], output[COVERAGE_KEY], strict=True):
            assert isinstance(counts, Mapping) and isinstance(rollout_id, str)
            rollout_sampled, rollout_trained = counts["sampled_tokens"], counts["trained_tokens"]
            rollout_trained = min(rollout_trained, rollout_sampled)
            sampled += rollout_sampled
            trained += rollout_trained
            lost = _lost_share(rollout_sampled, rollout_trained)
            if lost and (worst is None or lost > _lost_share(*worst[1:])):
                worst = (rollout_id, rollout_sampled, rollout_trained)
        return cls(sampled, trained, worst)

    @property
    def share(self) -> float | None:
        """Trained over sampled tokens; ``None`` when nothing trainable was sampled."""
        return self.trained_tokens / self.sampled_tokens if self.sampled_tokens else None

    def shortfall(self, threshold: float, groups: Iterable[Sequence[Trajectory]]) -> str | None:
        """One line saying why the step is below ``threshold`` (the cause read from the
        worst rollout's record among ``groups``), or ``None`` when it is not."""
        share = self.share
        if share is None or share >= threshold or self.worst is None:
            return None
        rollout_id, sampled, trained = self.worst
        record = next((t for group in groups for t in group if t.rollout_id == rollout_id), None)
        return (
            f"token coverage {share:.1%} is below --min-token-coverage {threshold:g}: "
            f"{self.sampled_tokens - self.trained_tokens} of {self.sampled_tokens} sampled "
            f"tokens reached no training sample; worst rollout {rollout_id}: {trained} of "
            f"{sampled} trained, {_cause(record)}"
        )


def _lost_share(sampled: int, trained: int) -> float:
    return (sampled - trained) / sampled if sampled else 0.0


def _cause(record: Trajectory | None) -> str:
    if record is None:
        return "its record was not found"
    headless = sum(
        1
        for call in record.model_calls
        if call.completion_token_ids is not None and call.prompt_token_ids is None
    )
    if headless:
        return f"{headless} of its model calls returned completion ids without prompt ids"
    branches = record.branches
    began = ", ".join(branch.began for branch in branches)
    return (
        f"the training sequences built for it hold fewer tokens than its {len(branches)} "
        f"branch(es) (began: {began})"
    )
