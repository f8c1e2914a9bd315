"""``RunReport``: the summary of a run, computed from its complete groups."""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from benchmax._file_replace import replace_file
from benchmax._vocabulary import OUTPUT_EXCEEDED, TOKEN_USAGE_KEYS
from benchmax.results._group import TrajectoryGroup
from benchmax.results._learning_signal import group_signal, is_scored, scalar_of
from benchmax.results._metrics import PassAtK, is_binary, pass_at_k_of_counts
from benchmax.stitching import TokenCoverage

__all__ = ["CoverageStats", "ReportTally", "RewardStats", "RunReport", "UsageStats", "summarize"]


@dataclass(frozen=True, slots=True)
class CoverageStats:
    """Token coverage over the rollouts that recorded token ids (their ``coverage``):
    how many did (``rollouts``), how many had several branches (``branched_rollouts``),
    the completion tokens they sampled and those their training samples hold, and how
    many branches began for each reason (``benchmax.stitching``)."""

    rollouts: int
    branched_rollouts: int
    sampled_tokens: int
    trained_tokens: int
    branches_began: dict[str, int]

    @property
    def share(self) -> float:
        """Trained over sampled tokens (1.0 when none was sampled)."""
        return self.trained_tokens / self.sampled_tokens if self.sampled_tokens else 1.0


class _CoverageTally:
    def __init__(self) -> None:
        self.rollouts = self.branched = self.sampled = self.trained = 0
        self.began: Counter[str] = Counter()

    def add(self, coverage: TokenCoverage) -> None:
        self.rollouts += 1
        self.branched += len(coverage.branches) > 1
        self.sampled += coverage.sampled_tokens
        self.trained += coverage.trained_tokens
        self.began.update(branch.began for branch in coverage.branches)

    def stats(self) -> CoverageStats | None:
        if not self.rollouts:
            return None
        return CoverageStats(
            self.rollouts, self.branched, self.sampled, self.trained, dict(self.began)
        )


@dataclass(frozen=True, slots=True)
class RewardStats:
    """Mean, population standard deviation, min and max of one reward key over all rollouts."""

    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> RewardStats:
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
    def of(cls, usages: Iterable[Mapping[str, object]]) -> UsageStats | None:
        """Stats of the given per-rollout usages (``None`` when there are none).

        A count that is not an integer (a hand-edited results line) is left out.
        """
        tally = _UsageTally()
        for usage in usages:
            tally.add(usage)
        return tally.stats()


class _UsageTally:
    """``UsageStats`` summed one rollout's usage at a time (integers: exact in any order)."""

    def __init__(self) -> None:
        self.rollouts = 0
        self.totals: dict[str, int] = {}
        self.completions = 0
        self.completion_max: int | None = None

    def add(self, usage: Mapping[str, object]) -> None:
        self.rollouts += 1
        for key in TOKEN_USAGE_KEYS:
            count = usage.get(key)
            if isinstance(count, int) and not isinstance(count, bool):
                self.totals[key] = self.totals.get(key, 0) + count
                if key == "completion_tokens":
                    self.completions += 1
                    if self.completion_max is None or count > self.completion_max:
                        self.completion_max = count

    def stats(self) -> UsageStats | None:
        if not self.rollouts:
            return None
        total = self.totals.get
        return UsageStats(
            rollouts=self.rollouts,
            prompt_tokens=total("prompt_tokens"),
            completion_tokens=total("completion_tokens"),
            total_tokens=total("total_tokens"),
            reasoning_tokens=total("reasoning_tokens"),
            cached_tokens=total("cached_tokens"),
            completion_tokens_mean=(
                self.totals["completion_tokens"] / self.completions if self.completions else None
            ),
            completion_tokens_max=self.completion_max,
        )


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
    mean absolute advantage of the scored rollouts. ``coverage`` sums the rollouts'
    token coverage (``None`` when none recorded token ids).

    ``groups_retried`` counts the groups this invocation ran again because their latest
    attempt had failed operationally (``run --retry-failed``); ``model_call_retries`` the
    model calls of this invocation's rollouts that were retried after a transient failure
    (429, 5xx, a reset connection, a timeout; ``model_retries``).
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
    coverage: CoverageStats | None = None
    groups_retried: int = 0
    model_call_retries: int = 0

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
        data["coverage"] = None if self.coverage is None else asdict(self.coverage)
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
    groups: Iterable[TrajectoryGroup],
    groups_resumed: int,
    rollouts_run: int,
    wall_seconds: float,
    reward_weights: Mapping[str, float] | None = None,
    groups_retried: int = 0,
    model_call_retries: int = 0,
) -> RunReport:
    """Build the report from complete groups (``reward_weights``: the environment's, for
    the weighted scalar reward and the advantages; ``None``: the sum of the rewards;
    ``groups_retried``, ``model_call_retries``: this invocation's, as ``RunReport`` says)."""
    tally = ReportTally(reward_weights)
    for group in groups:
        tally.add(group)
    report = tally.report(
        run_id=run_id,
        results_path=results_path,
        examples=examples,
        groups_resumed=groups_resumed,
        rollouts_run=rollouts_run,
        wall_seconds=wall_seconds,
    )
    return replace(report, groups_retried=groups_retried, model_call_retries=model_call_retries)


class ReportTally:
    """What ``summarize`` computes, taken one complete group at a time, so a reader can
    summarize a file too large to hold (``benchmax view``).

    Memory: per rollout and reward key, its value and its termination reason's number
    (12 bytes); per rollout its weighted scalar (12) and advantage (8); per group its size
    and per binary-candidate key its successes; never a transcript. Groups must be added
    in the order the report is about (example order): first appearances order the keys and
    reasons, and pass@k sums over groups in that order.
    """

    def __init__(self, reward_weights: Mapping[str, float] | None = None) -> None:
        self.reward_weights = None if reward_weights is None else dict(reward_weights)
        self.groups = 0
        self.flat_groups = 0
        self._signal_groups = 0
        self._rollout_reasons: Counter[str] = Counter()
        self._group_reasons: Counter[str] = Counter()
        self._reason_numbers: dict[str, int] = {}
        self._scored_keys: dict[str, None] = {}
        self._values: dict[str, tuple[array[float], array[int]]] = {}
        self._scalars: tuple[array[float], array[int]] = (array("d"), array("I"))
        self._advantages = array("d")
        self._sizes = array("I")
        self._successes: dict[str, tuple[int, array[int]]] = {}
        self._usage = _UsageTally()
        self._coverage = _CoverageTally()

    @property
    def reward_keys(self) -> list[str]:
        """Every reward key, in order of first appearance."""
        return list(self._values)

    @property
    def rollouts(self) -> int:
        """How many rollouts the groups added hold."""
        return self._rollout_reasons.total()

    @property
    def reasons(self) -> list[str]:
        """Every termination reason, in order of first appearance."""
        return list(self._reason_numbers)

    def reward_values(self, key: str) -> tuple[Sequence[float], Sequence[int]]:
        """Every value of reward ``key`` in rollout order, and beside each its rollout's
        termination reason (an index into ``reasons``)."""
        return self._values[key]

    def add(self, group: TrajectoryGroup) -> None:
        """Count one complete group."""
        self.add_outcomes(group.termination_reasons, group.rewards, group.usage)
        for trajectory in group.trajectories:
            self.add_coverage(trajectory.coverage)

    def add_coverage(self, coverage: TokenCoverage | None) -> None:
        """Count one rollout's token coverage (``None``: it recorded no token ids)."""
        if coverage is not None:
            self._coverage.add(coverage)

    def add_outcomes(
        self,
        reasons: Sequence[str],
        rewards: Sequence[Mapping[str, float]],
        usage: Sequence[Mapping[str, object] | None],
        *,
        signal: tuple[Sequence[float | None], Sequence[float | None]] | None = None,
    ) -> None:
        """Count one complete group given as its rollouts' termination reasons, rewards and
        usage, in group order. ``signal``: their weighted scalars and GRPO advantages when
        the caller has them already (as ``scalar_of`` and ``group_signal`` give them), else
        they are computed here."""
        for used in usage:
            if used:
                self._usage.add(used)
        self._rollout_reasons.update(reasons)
        self._group_reasons.update(set(reasons))
        numbers = [self._reason_numbers.setdefault(r, len(self._reason_numbers)) for r in reasons]
        if signal is None:
            computed = [scalar_of(each, self.reward_weights) for each in rewards]
            signal = computed, group_signal(computed, reasons)
        scalars, group_advantages = signal
        for each, reason, number, scalar in zip(rewards, reasons, numbers, scalars, strict=True):
            for key, value in each.items():
                values, of_reason = self._values.setdefault(key, (array("d"), array("I")))
                values.append(float(value))
                of_reason.append(number)
            if is_scored(reason):
                self._scored_keys.update(dict.fromkeys(each))
            if scalar is not None:
                self._scalars[0].append(scalar)
                self._scalars[1].append(number)
        advantages = [
            a
            for a, reason in zip(group_advantages, reasons, strict=True)
            if a is not None and is_scored(reason)
        ]
        self._advantages.extend(advantages)
        self._signal_groups += any(a != 0.0 for a in advantages)
        self.flat_groups += all(each == rewards[0] for each in rewards[1:])
        for key in self._values:
            _start, successes = self._successes.setdefault(key, (self.groups, array("I")))
            # A rollout without the key (e.g. one that failed before scoring) did not pass.
            successes.append(sum(1 for each in rewards if each.get(key, 0.0) == 1))
        self._sizes.append(len(reasons))
        self.groups += 1

    def report(
        self,
        *,
        run_id: str,
        results_path: Path | None,
        examples: int,
        groups_resumed: int,
        rollouts_run: int,
        wall_seconds: float,
    ) -> RunReport:
        """The report of the groups added so far."""
        scored_numbers = {n for reason, n in self._reason_numbers.items() if is_scored(reason)}
        reasons = self._rollout_reasons
        total = reasons.total()
        failed = sum(n for reason, n in reasons.items() if not is_scored(reason))
        groups = self.groups
        stats = {key: RewardStats.of(values) for key, (values, _) in self._values.items()}
        scored = {  # in order of first appearance in a scored rollout
            key: RewardStats.of(_scored(*self._values[key], scored_numbers))
            for key in self._scored_keys
        }
        scored_scalars = _scored(*self._scalars, scored_numbers)
        advantages = self._advantages
        return RunReport(
            run_id=run_id,
            results_path=results_path,
            examples=examples,
            groups=groups,
            groups_resumed=groups_resumed,
            rollouts=total,
            rollouts_by_reason=dict(reasons.most_common()),
            groups_by_reason=dict(self._group_reasons.most_common()),
            reward_stats=stats,
            no_variance_group_share=self.flat_groups / groups if groups else 0.0,
            rollouts_run=rollouts_run,
            rollouts_per_second=rollouts_run / wall_seconds if wall_seconds > 0 else 0.0,
            wall_seconds=wall_seconds,
            pass_at_k=self._pass_at_k(),
            usage=self._usage.stats(),
            output_exceeded_share=reasons[OUTPUT_EXCEEDED] / total if total else 0.0,
            scored_reward_stats=scored,
            failed_share=failed / total if total else 0.0,
            scalar_stats=RewardStats.of(self._scalars[0]) if self._scalars[0] else None,
            scored_scalar_stats=RewardStats.of(scored_scalars) if scored_scalars else None,
            reward_weights=self.reward_weights,
            advantage_signal_share=self._signal_groups / groups if groups else 0.0,
            mean_abs_advantage=math.fsum(map(abs, advantages)) / len(advantages)
            if advantages
            else 0.0,
            coverage=self._coverage.stats(),
        )

    def _pass_at_k(self) -> dict[str, PassAtK]:
        """Group metrics (pass@1, pass@k, any-success share) of every 0/1 reward key."""
        metrics: dict[str, PassAtK] = {}
        for key, (values, _reasons) in self._values.items():
            if not is_binary(values) or not all(self._sizes):
                continue
            start, successes = self._successes[key]
            found = pass_at_k_of_counts(_GroupCounts(self._sizes, start, successes))
            if found is not None:
                metrics[key] = found
        return metrics


class _GroupCounts(Sequence[tuple[int, int]]):
    """Each group's ``(rollouts, successes)`` of one key, read from the tally's arrays
    (groups before the key's first one had no success)."""

    def __init__(self, sizes: array[int], start: int, successes: array[int]) -> None:
        self._sizes, self._start, self._successes = sizes, start, successes

    def __len__(self) -> int:
        return len(self._sizes)

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[int, int]]: ...
    def __getitem__(self, index: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        found = self._successes[index - self._start] if index >= self._start else 0
        return self._sizes[index], found


def _scored(values: array[float], of_reason: array[int], scored: set[int]) -> array[float]:
    """The values whose rollout's termination reason is scored (in ``scored``)."""
    return array("d", (v for v, n in zip(values, of_reason, strict=True) if n in scored))
