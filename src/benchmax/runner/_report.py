"""``RunReport``: the summary of a run, computed from its complete groups."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmax.runner._results import CompletedGroup

__all__ = ["RewardStats", "RunReport", "summarize"]


@dataclass(frozen=True, slots=True)
class RewardStats:
    """Mean, population standard deviation, min and max of one reward key over all rollouts."""

    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> RewardStats:
        mean = math.fsum(values) / len(values)
        variance = math.fsum((v - mean) ** 2 for v in values) / len(values)
        return cls(mean=mean, std=math.sqrt(variance), min=min(values), max=max(values))


@dataclass(frozen=True, slots=True)
class RunReport:
    """What a run produced.

    Counts and statistics cover every complete group in the results (resumed ones included);
    ``rollouts_per_second`` covers the rollouts this invocation ran, over ``wall_seconds``.
    ``groups_by_reason`` counts the groups in which a termination reason occurs at least once.
    ``no_variance_group_share`` is the share of groups whose rollouts all got the same rewards
    (no learning signal for group-relative training).
    """

    run_id: str
    results_path: Path | None
    examples: int
    groups: int
    groups_resumed: int
    rollouts: int
    rollouts_by_reason: Mapping[str, int]
    groups_by_reason: Mapping[str, int]
    reward_stats: Mapping[str, RewardStats]
    no_variance_group_share: float
    rollouts_run: int
    rollouts_per_second: float
    wall_seconds: float

    @property
    def report_path(self) -> Path | None:
        """Where the JSON summary is written: beside the results, ``<stem>.report.json``."""
        if self.results_path is None:
            return None
        return self.results_path.with_name(self.results_path.stem + ".report.json")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["results_path"] = None if self.results_path is None else str(self.results_path)
        data["rollouts_by_reason"] = dict(self.rollouts_by_reason)
        data["groups_by_reason"] = dict(self.groups_by_reason)
        data["reward_stats"] = {k: asdict(v) for k, v in self.reward_stats.items()}
        return data

    def write_json(self) -> Path | None:
        """Write ``to_dict()`` to ``report_path`` (nothing when there is no results file)."""
        path = self.report_path
        if path is not None:
            path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path


def summarize(
    *,
    run_id: str,
    results_path: Path | None,
    examples: int,
    groups: Iterable[CompletedGroup],
    groups_resumed: int,
    rollouts_run: int,
    wall_seconds: float,
) -> RunReport:
    """Build the report from complete groups."""
    groups = list(groups)
    rollout_reasons: Counter[str] = Counter()
    group_reasons: Counter[str] = Counter()
    values: dict[str, list[float]] = {}
    flat_groups = 0
    for group in groups:
        rollout_reasons.update(group.termination_reasons)
        group_reasons.update(set(group.termination_reasons))
        for rewards in group.rewards:
            for key, value in rewards.items():
                values.setdefault(key, []).append(float(value))
        if all(rewards == group.rewards[0] for rewards in group.rewards[1:]):
            flat_groups += 1
    return RunReport(
        run_id=run_id,
        results_path=results_path,
        examples=examples,
        groups=len(groups),
        groups_resumed=groups_resumed,
        rollouts=sum(rollout_reasons.values()),
        rollouts_by_reason=dict(rollout_reasons.most_common()),
        groups_by_reason=dict(group_reasons.most_common()),
        reward_stats={key: RewardStats.of(vals) for key, vals in values.items()},
        no_variance_group_share=flat_groups / len(groups) if groups else 0.0,
        rollouts_run=rollouts_run,
        rollouts_per_second=rollouts_run / wall_seconds if wall_seconds > 0 else 0.0,
        wall_seconds=wall_seconds,
    )
