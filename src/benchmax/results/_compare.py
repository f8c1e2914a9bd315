"""Compare two runs on the examples they share: paired differences with bootstrap intervals."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.results._metrics import PassAtK, is_binary, pass_at_k_of_counts
from benchmax.results._reading import GroupScan, Results
from benchmax.results._selection import groups_of

__all__ = [
    "Comparison",
    "ExampleChange",
    "KeyComparison",
    "bootstrap_interval",
    "compare_files",
    "compare_results",
]


def bootstrap_interval(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``.

    Draws ``resamples`` samples of ``len(values)`` values with replacement (a
    ``random.Random(seed)``, so the result is reproducible), takes each sample's mean and
    returns the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those
    means, linearly interpolated between order statistics (Hyndman & Fan type 7). This is
    the percentile method of Efron & Tibshirani 1993, "An Introduction to the Bootstrap",
    ch. 13. One value gives the degenerate interval ``(v, v)``.

    Raises ``ValueError`` for no values, a non-finite value, ``confidence`` outside
    ``(0, 1)`` or ``resamples < 1``.
    """
    if not values:
        raise ValueError("bootstrap_interval needs at least one value")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("bootstrap_interval needs finite values")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n = len(values)
    if n == 1:
        return (float(values[0]), float(values[0]))
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    alpha = (1 - confidence) / 2
    return (_quantile(means, alpha), _quantile(means, 1 - alpha))


def _quantile(ordered: Sequence[float], p: float) -> float:
    """Type-7 quantile of sorted ``ordered``: ``x[h] + (h - floor h)(x[h+1] - x[h])``,
    ``h = (N - 1) p`` (0-based)."""
    h = (len(ordered) - 1) * p
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


@dataclass(frozen=True, slots=True)
class KeyComparison:
    """One reward key compared over the matched examples.

    Each example contributes the mean of its group's values; ``mean_a`` and ``mean_b``
    average those over examples, ``difference`` is ``mean_b - mean_a`` (the mean paired
    difference) and ``interval`` its percentile-bootstrap 95% interval over examples.
    ``better``/``worse``/``equal`` are the shares of examples whose B mean is higher, lower
    or the same. ``pass_a``/``pass_b`` are the pass@k metrics of binary keys (``None``
    otherwise).
    """

    key: str
    examples: int
    mean_a: float
    mean_b: float
    difference: float
    interval: tuple[float, float]
    better: float
    worse: float
    equal: float
    pass_a: PassAtK | None
    pass_b: PassAtK | None


@dataclass(frozen=True, slots=True)
class ExampleChange:
    """How one example's mean of ``key`` moved from run A to run B."""

    example_id: str
    key: str
    mean_a: float
    mean_b: float

    @property
    def difference(self) -> float:
        return self.mean_b - self.mean_a


@dataclass(frozen=True, slots=True)
class Comparison:
    """Run B against run A on the examples both contain (matched by example id)."""

    matched: int
    only_in_a: int
    only_in_b: int
    keys: tuple[KeyComparison, ...]
    keys_only_in_a: tuple[str, ...]
    keys_only_in_b: tuple[str, ...]
    changed_most: tuple[ExampleChange, ...]

    def to_json(self) -> dict[str, Any]:
        """The comparison as JSON data (what ``benchmax compare --json`` prints, there with
        the two paths as ``a`` and ``b``)::

            {"matched": int, "only_in_a": int, "only_in_b": int,
             "keys": [{"key": str, "examples": int, "mean_a": float, "mean_b": float,
                       "difference": float, "interval": [low, high],
                       "better": float, "worse": float, "equal": float,
                       "pass_a": {"k": int, "pass_at_1": float, "pass_at_k": float,
                                  "any_success_share": float} | null,
                       "pass_b": ... | null}, ...],
             "keys_only_in_a": [str, ...], "keys_only_in_b": [str, ...],
             "changed_most": [{"example_id": str, "key": str, "mean_a": float,
                               "mean_b": float, "difference": float}, ...]}

        ``better``/``worse``/``equal`` are shares in [0, 1]; ``difference`` is B - A; a
        number that is not finite is ``null``.
        """
        return {
            "matched": self.matched,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "keys": [_key_json(item) for item in self.keys],
            "keys_only_in_a": list(self.keys_only_in_a),
            "keys_only_in_b": list(self.keys_only_in_b),
            "changed_most": [
                {
                    "example_id": change.example_id,
                    "key": change.key,
                    "mean_a": _finite(change.mean_a),
                    "mean_b": _finite(change.mean_b),
                    "difference": _finite(change.difference),
                }
                for change in self.changed_most
            ],
        }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _key_json(item: KeyComparison) -> dict[str, Any]:
    return {
        "key": item.key,
        "examples": item.examples,
        "mean_a": _finite(item.mean_a),
        "mean_b": _finite(item.mean_b),
        "difference": _finite(item.difference),
        "interval": [_finite(item.interval[0]), _finite(item.interval[1])],
        "better": item.better,
        "worse": item.worse,
        "equal": item.equal,
        "pass_a": _pass_json(item.pass_a),
        "pass_b": _pass_json(item.pass_b),
    }


def _pass_json(metrics: PassAtK | None) -> dict[str, Any] | None:
    if metrics is None:
        return None
    return {
        "k": metrics.k,
        "pass_at_1": metrics.pass_at_1,
        "pass_at_k": metrics.pass_at_k,
        "any_success_share": metrics.any_success_share,
    }


@dataclass(frozen=True, slots=True)
class _KeyTally:
    """One example's values of one reward key, reduced: their mean, how many, how many
    are 1, and whether all are 0 or 1."""

    mean: float
    count: int
    successes: int
    binary: bool


@dataclass(frozen=True, slots=True)
class _ExampleTally:
    """What ``compare`` keeps of one complete group: its example id and, per reward key
    in order of first appearance, the ``_KeyTally`` of its rollouts' values."""

    example_id: str
    keys: dict[str, _KeyTally]


def _tally(example_id: str, rewards: Sequence[Mapping[str, float]]) -> _ExampleTally:
    """``rewards``: the group's rollouts' rewards, in group order."""
    values: dict[str, list[float]] = {}
    for rollout in rewards:
        for key, value in rollout.items():
            values.setdefault(key, []).append(float(value))
    return _ExampleTally(
        example_id,
        {
            key: _KeyTally(_mean(vals), len(vals), sum(1 for v in vals if v == 1), is_binary(vals))
            for key, vals in values.items()
        },
    )


def compare_results(
    a: Results,
    b: Results,
    *,
    key: str | None = None,
    top: int = 10,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare run ``b`` with run ``a`` per reward key on the examples they share.

    Examples are matched by example id (complete groups only). ``changed_most`` lists the
    ``top`` matched examples whose mean of ``key`` (default: the first shared reward key)
    moved most, largest absolute change first, ties in A's example order.

    Raises ``ValueError`` when no example id is in both runs, when the runs share no reward
    key, or when ``key`` is not a shared key.
    """
    return _compare_tallies(
        _tallies_of(a), _tallies_of(b), key=key, top=top, resamples=resamples, seed=seed
    )


def compare_files(
    a: str | Path,
    b: str | Path,
    *,
    key: str | None = None,
    top: int = 10,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """``compare_results`` of two results files, read as streams: memory holds one line at
    a time, the groups still missing lines and, per example, a few numbers per reward key
    (never a transcript). Raises ``ResultsFileError`` as ``read_results`` does (naming
    ``file:line``), and ``ValueError`` as ``compare_results`` does."""
    return _compare_tallies(
        _tallies_in(a), _tallies_in(b), key=key, top=top, resamples=resamples, seed=seed
    )


def _tallies_of(results: Results) -> list[_ExampleTally]:
    return [
        _tally(group.example_id, [r.rewards for r in group.trajectories])
        for group in groups_of(results)
    ]


def _tallies_in(path: str | Path) -> list[_ExampleTally]:
    """The tallies of a file's complete groups in example order, as ``read_results`` would
    choose them (per example, the complete group of the highest attempt)."""
    scan = GroupScan(path, build=False)
    tallies = [_tally(group[0]["example_id"], [r["rewards"] for r in group]) for _k, group in scan]
    return [tallies[n] for n in scan.chosen()]


def _compare_tallies(
    a: Sequence[_ExampleTally],
    b: Sequence[_ExampleTally],
    *,
    key: str | None,
    top: int,
    resamples: int,
    seed: int,
) -> Comparison:
    groups_a = {group.example_id: group for group in a}
    groups_b = {group.example_id: group for group in b}
    matched = [example_id for example_id in groups_a if example_id in groups_b]
    if not matched:
        raise ValueError(
            f"no examples in common: A has {len(groups_a)} complete example group(s), "
            f"B has {len(groups_b)}, and no example id is in both"
        )
    keys_a, keys_b = _keys_of(a), _keys_of(b)
    shared = [k for k in keys_a if k in keys_b]
    if not shared:
        raise ValueError(
            f"the runs share no reward key (A: {', '.join(keys_a) or 'none'}; "
            f"B: {', '.join(keys_b) or 'none'})"
        )
    if key is None:
        key = shared[0]
    elif key not in shared:
        raise ValueError(f"reward key {key!r} is not in both runs (shared: {', '.join(shared)})")
    pairs = [(groups_a[example_id], groups_b[example_id]) for example_id in matched]
    compared = (_compare_key(k, pairs, resamples=resamples, seed=seed) for k in shared)
    comparisons = tuple(comparison for comparison in compared if comparison is not None)
    changes = [
        ExampleChange(example_id, key, ga.keys[key].mean, gb.keys[key].mean)
        for example_id, (ga, gb) in zip(matched, pairs, strict=True)
        if key in ga.keys and key in gb.keys
    ]
    changes.sort(key=lambda change: -abs(change.difference))
    return Comparison(
        matched=len(matched),
        only_in_a=len(groups_a) - len(matched),
        only_in_b=len(groups_b) - len(matched),
        keys=comparisons,
        keys_only_in_a=tuple(k for k in keys_a if k not in keys_b),
        keys_only_in_b=tuple(k for k in keys_b if k not in keys_a),
        changed_most=tuple(change for change in changes[:top] if change.difference != 0),
    )


def _keys_of(tallies: Sequence[_ExampleTally]) -> list[str]:
    """Every reward key, in order of first appearance (examples in order)."""
    keys: dict[str, None] = {}
    for tally in tallies:
        keys.update(dict.fromkeys(tally.keys))
    return list(keys)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _compare_key(
    key: str, pairs: Sequence[tuple[_ExampleTally, _ExampleTally]], *, resamples: int, seed: int
) -> KeyComparison | None:
    matched = [(ga, gb) for ga, gb in pairs if key in ga.keys and key in gb.keys]
    if not matched:
        return None
    for ga, gb in matched:
        for run, group in (("A", ga), ("B", gb)):
            if not math.isfinite(mean := group.keys[key].mean):
                raise ValueError(
                    f"reward {key!r} of example {group.example_id!r} in {run} is not a finite "
                    f"number (its group's mean is {mean}): paired differences need finite "
                    "rewards"
                )
    usable = [(ga.keys[key], gb.keys[key]) for ga, gb in matched]
    means_a = [ta.mean for ta, _ in usable]
    means_b = [tb.mean for _, tb in usable]
    differences = [mb - ma for ma, mb in zip(means_a, means_b, strict=True)]
    n = len(differences)
    return KeyComparison(
        key=key,
        examples=n,
        mean_a=_mean(means_a),
        mean_b=_mean(means_b),
        difference=_mean(differences),
        interval=bootstrap_interval(differences, resamples=resamples, seed=seed),
        better=sum(d > 0 for d in differences) / n,
        worse=sum(d < 0 for d in differences) / n,
        equal=sum(d == 0 for d in differences) / n,
        pass_a=_pass_at_k([ta for ta, _ in usable]),
        pass_b=_pass_at_k([tb for _, tb in usable]),
    )


def _pass_at_k(tallies: Sequence[_KeyTally]) -> PassAtK | None:
    """pass@k over the examples when every one's values are all 0 or 1 (else ``None``)."""
    if not all(tally.binary for tally in tallies):
        return None
    return pass_at_k_of_counts([(tally.count, tally.successes) for tally in tallies])
