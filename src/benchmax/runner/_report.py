"""``RunReport``: the summary of a run, computed from its complete groups."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmax._file_replace import replace_file
from benchmax._vocabulary import OUTPUT_EXCEEDED, TOKEN_USAGE_KEYS
from benchmax.runner._learning_signal import group_signal, is_scored, scalar_of
from benchmax.runner._metrics import PassAtK, is_binary, pass_at_k_metrics
from benchmax.runner._records import CompletedGroup

__all__ = ["RewardStats", "RunReport", "UsageStats", "summarize"]


@dataclass(frozen=True, slots=True)
class RewardStats:
    """Mean, population standard deviation, min and max of one reward key over all rollouts."""

    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> RewardStats:
        """The stats of ``values`` (non-empty); never raises on huge, infinite or NaN
        values (the mean of values near the float limit is taken scaled; a spread too large
        for a float is ``inf``; NaN anywhere makes mean and std NaN)."""
        n = len(values)
        if any(math.isnan(v) for v in values):
            nan = math.nan
            return cls(mean=nan, std=nan, min=min(values), max=max(values))
        try:
            mean = math.fsum(values) / n
        except OverflowError:  # partial sums past the float limit
            mean = math.fsum(v / n for v in values)
        except ValueError:  # inf and -inf
            mean = math.nan
        try:
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
        except OverflowError:
            std = math.inf
        except ValueError:
            std = math.nan
        return cls(mean=mean, std=std, min=min(values), max=max(values))


@dataclass(frozen=True, slots=True)
class UsageStats:
    """Token usage of the rollouts whose model replies reported it.

    ``rollouts`` counts them; each total is the sum over those rollouts of the field (as
    reported by the server: ``None`` when no rollout reported it, never a made-up 0).
    ``completion_tokens_mean`` and ``completion_tokens_max`` are per rollout, over the
    rollouts that reported completion tokens.
    """

    rollouts: int
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    reasoning_tokens: int | None
    cached_tokens: int | None
    completion_tokens_mean: float | None
    completion_tokens_max: int | None

    @classmethod
    def of(cls, usages: Sequence[Mapping[str, object]]) -> UsageStats | None:
        """Stats of the given per-rollout usages (``None`` when the list is empty).

        A count that is not an integer (a hand-edited results line) is left out.
        """
        if not usages:
            return None
        totals: dict[str, int | None] = {}
        for key in TOKEN_USAGE_KEYS:
            values = _counts(usages, key)
            totals[key] = sum(values) if values else None
        completions = _counts(usages, "completion_tokens")
        return cls(
            rollouts=len(usages),
            prompt_tokens=totals["prompt_tokens"],
            completion_tokens=totals["completion_tokens"],
            total_tokens=totals["total_tokens"],
            reasoning_tokens=totals["reasoning_tokens"],
            cached_tokens=totals["cached_tokens"],
            completion_tokens_mean=(sum(completions) / len(completions)) if completions else None,
            completion_tokens_max=max(completions) if completions else None,
        )


def _counts(usages: Sequence[Mapping[str, object]], key: str) -> list[int]:
    return [
        count
        for usage in usages
        if isinstance(count := usage.get(key), int) and not isinstance(count, bool)
    ]


@dataclass(frozen=True, slots=True)
class RunReport:
    """What a run produced.

    Counts and statistics cover every complete group in the results (resumed ones included);
    ``rollouts_per_second`` covers the rollouts this invocation ran, over ``wall_seconds``.
    ``groups_by_reason`` counts the groups in which a termination reason occurs at least once.
    ``no_variance_group_share`` is the share of groups whose rollouts all got the same rewards
    (no learning signal for group-relative training). ``pass_at_k`` has, for every reward
    key whose values are all 0 or 1, pass@1, pass@k (k = the group size; the unbiased
    estimator of Chen et al. 2021, averaged over groups) and the share of groups with at
    least one success. ``usage`` sums token usage over the rollouts that reported it
    (``None`` when none did, or the results predate usage recording);
    ``output_exceeded_share`` is the share of rollouts that ended ``output_exceeded``.

    ``reward_stats`` covers every rollout (an operational failure's zeros included);
    ``scored_reward_stats`` covers the scored ones only (a trainable termination reason:
    ``finished`` and the budget limits), and ``failed_share`` is the share of rollouts that
    were not (operational failures), so a run where a quarter of the rollouts hit
    ``reward_error`` shows the model's mean beside how much failed. ``scalar_stats`` and
    ``scored_scalar_stats`` are the same for the weighted scalar reward
    (``benchmax.training.scalar_reward`` by ``reward_weights``; ``None`` when no rollout has
    one). ``advantage_signal_share`` is the share of groups whose GRPO advantages over
    their scored rollouts are not all zero (a learning signal), ``mean_abs_advantage`` the
    mean absolute advantage of the scored rollouts.
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
    pass_at_k: Mapping[str, PassAtK] = field(default_factory=dict)
    usage: UsageStats | None = None
    output_exceeded_share: float = 0.0
    scored_reward_stats: Mapping[str, RewardStats] = field(default_factory=dict)
    failed_share: float = 0.0
    scalar_stats: RewardStats | None = None
    scored_scalar_stats: RewardStats | None = None
    reward_weights: Mapping[str, float] | None = None
    advantage_signal_share: float = 0.0
    mean_abs_advantage: float = 0.0

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
        data["scored_reward_stats"] = {k: asdict(v) for k, v in self.scored_reward_stats.items()}
        for name in ("scalar_stats", "scored_scalar_stats"):
            stats = getattr(self, name)
            data[name] = None if stats is None else asdict(stats)
        data["reward_weights"] = None if self.reward_weights is None else dict(self.reward_weights)
        data["pass_at_k"] = {k: asdict(v) for k, v in self.pass_at_k.items()}
        data["usage"] = None if self.usage is None else asdict(self.usage)
        return data

    def write_json(self) -> Path | None:
        """Write ``to_dict()`` to ``report_path`` (nothing when there is no results file)."""
        path = self.report_path
        if path is not None:  # replaced whole: a full disk never leaves half a report
            replace_file(path, (json.dumps(self.to_dict(), indent=2) + "\n").encode("utf-8"))
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
    reward_weights: Mapping[str, float] | None = None,
) -> RunReport:
    """Build the report from complete groups (``reward_weights``: the environment's, for
    the weighted scalar reward and the advantages; ``None``: the sum of the rewards)."""
    groups = list(groups)
    rollout_reasons: Counter[str] = Counter()
    group_reasons: Counter[str] = Counter()
    values: dict[str, list[float]] = {}
    scored: dict[str, list[float]] = {}
    scalars: list[float] = []
    scored_scalars: list[float] = []
    advantages: list[float] = []
    signal_groups = 0
    flat_groups = 0
    usages: list[Mapping[str, object]] = []
    for group in groups:
        usages.extend(usage for usage in group.usage or () if usage)
        rollout_reasons.update(group.termination_reasons)
        group_reasons.update(set(group.termination_reasons))
        group_scalars = [scalar_of(rewards, reward_weights) for rewards in group.rewards]
        for rewards, reason, scalar in zip(
            group.rewards, group.termination_reasons, group_scalars, strict=True
        ):
            for key, value in rewards.items():
                values.setdefault(key, []).append(float(value))
                if is_scored(reason):
                    scored.setdefault(key, []).append(float(value))
            if scalar is not None:
                scalars.append(scalar)
                if is_scored(reason):
                    scored_scalars.append(scalar)
        group_advantages = [
            a
            for a, reason in zip(
                group_signal(group_scalars, group.termination_reasons),
                group.termination_reasons,
                strict=True,
            )
            if a is not None and is_scored(reason)
        ]
        advantages.extend(group_advantages)
        signal_groups += any(a != 0.0 for a in group_advantages)
        if all(rewards == group.rewards[0] for rewards in group.rewards[1:]):
            flat_groups += 1
    total = rollout_reasons.total()
    failed = sum(n for reason, n in rollout_reasons.items() if not is_scored(reason))
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
        pass_at_k=_pass_at_k(groups, values),
        usage=UsageStats.of(usages),
        output_exceeded_share=(
            rollout_reasons[OUTPUT_EXCEEDED] / rollout_reasons.total() if rollout_reasons else 0.0
        ),
        scored_reward_stats={key: RewardStats.of(vals) for key, vals in scored.items()},
        failed_share=failed / total if total else 0.0,
        scalar_stats=RewardStats.of(scalars) if scalars else None,
        scored_scalar_stats=RewardStats.of(scored_scalars) if scored_scalars else None,
        reward_weights=None if reward_weights is None else dict(reward_weights),
        advantage_signal_share=signal_groups / len(groups) if groups else 0.0,
        mean_abs_advantage=math.fsum(map(abs, advantages)) / len(advantages) if advantages else 0.0,
    )


def _pass_at_k(
    groups: list[CompletedGroup], values: Mapping[str, list[float]]
) -> dict[str, PassAtK]:
    """Group metrics (pass@1, pass@k, any-success share) of every 0/1 reward key."""
    metrics: dict[str, PassAtK] = {}
    for key, key_values in values.items():
        if not is_binary(key_values):
            continue
        # A rollout without the key (e.g. one that failed before scoring) did not pass.
        found = pass_at_k_metrics(
            [[float(rewards.get(key, 0.0)) for rewards in group.rewards] for group in groups]
        )
        if found is not None:
            metrics[key] = found
    return metrics
