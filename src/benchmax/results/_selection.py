"""Pick rollouts out of a results file: by termination reason, example id and reward range.

``benchmax show`` prints such a selection; the HTML report filters its table the same way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from benchmax.results._group import TrajectoryGroup
from benchmax.results._reading import Results, iter_lazy_groups
from benchmax.results._records import reward_weights_of
from benchmax.trajectory import Trajectory

__all__ = [
    "FileSelection",
    "RolloutFilter",
    "groups_of",
    "reward_keys_of",
    "select_from_file",
    "select_rollouts",
]


class _Selectable(Protocol):
    @property
    def termination_reason(self) -> str: ...
    @property
    def example_id(self) -> str: ...
    @property
    def rewards(self) -> Mapping[str, float]: ...


def groups_of(results: Results) -> list[TrajectoryGroup]:
    """The complete groups of ``results`` as ``TrajectoryGroup`` records (with the header's
    ``reward_weights``), in example order, each in ``group_index`` order."""
    by_index: dict[int, list[Trajectory]] = {}
    for record in results.rollouts:
        by_index.setdefault(record.example_index or 0, []).append(record)
    weights = reward_weights_of(results.header)
    return [
        TrajectoryGroup(tuple(sorted(records, key=lambda r: r.group_index)), weights)
        for _index, records in sorted(by_index.items())
    ]


def reward_keys_of(results: Results) -> list[str]:
    """Every reward key in ``results``, in order of first appearance."""
    keys: dict[str, None] = {}
    for record in results.rollouts:
        keys.update(dict.fromkeys(record.rewards))
    return list(keys)


@dataclass(frozen=True, slots=True)
class RolloutFilter:
    """Which rollouts to select; every condition given must hold (``None``: no condition).

    ``reason`` is a termination reason; ``example_id`` an example id or a prefix of one
    (at least 4 characters, like a short git hash); ``min_reward``/``max_reward`` bound
    reward ``key`` inclusively (``key`` defaults to the file's first reward key).

    Raises ``ValueError`` for an empty reason or id, a non-finite bound, or
    ``min_reward > max_reward``.
    """

    reason: str | None = None
    example_id: str | None = None
    key: str | None = None
    min_reward: float | None = None
    max_reward: float | None = None

    def __post_init__(self) -> None:
        for name in ("reason", "example_id", "key"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty string or None")
        for name in ("min_reward", "max_reward"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise ValueError(f"{name} must be a finite number or None, got {value!r}")
        if (
            self.min_reward is not None
            and self.max_reward is not None
            and self.min_reward > self.max_reward
        ):
            raise ValueError(
                f"min_reward {self.min_reward} is greater than max_reward {self.max_reward}"
            )

    @property
    def bounds_reward(self) -> bool:
        return self.min_reward is not None or self.max_reward is not None

    def matches(self, record: _Selectable, key: str | None) -> bool:
        """Whether ``record`` passes; ``key`` is the reward key the bounds apply to."""
        if self.reason is not None and record.termination_reason != self.reason:
            return False
        if self.example_id is not None and not _id_matches(record.example_id, self.example_id):
            return False
        if self.bounds_reward:
            value = record.rewards.get(key) if key is not None else None
            if value is None:
                return False
            if self.min_reward is not None and value < self.min_reward:
                return False
            if self.max_reward is not None and value > self.max_reward:
                return False
        return True


def _id_matches(example_id: str, wanted: str) -> bool:
    return example_id == wanted or (len(wanted) >= 4 and example_id.startswith(wanted))


def select_rollouts(
    results: Results, selection: RolloutFilter, *, limit: int | None = None
) -> list[Trajectory]:
    """The rollouts of ``results`` that pass ``selection``, in file order (at most ``limit``).

    Raises ``ValueError`` when ``selection.key`` is not a reward key of the file, or when
    reward bounds are given and the file has no reward keys.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    key = _bounded_key(results, selection)
    matching = (r for r in results.rollouts if selection.matches(r, key))
    return list(itertools.islice(matching, limit))


def _bounded_key(results: Results, selection: RolloutFilter) -> str | None:
    keys = reward_keys_of(results)
    if selection.key is not None:
        if selection.key not in keys:
            known = ", ".join(keys) or "none"
            raise ValueError(f"reward key {selection.key!r} is not in the results (keys: {known})")
        return selection.key
    if selection.bounds_reward and not keys:
        raise ValueError("the results have no reward keys to bound")
    return keys[0] if keys else None


@dataclass(frozen=True, slots=True)
class FileSelection:
    """What ``select_from_file`` found: the first ``limit`` matching rollouts (file order),
    how many match in all, how many rollouts the file's complete groups hold, and the
    termination reasons seen (sorted)."""

    shown: tuple[Trajectory, ...]
    matching: int
    rollouts: int
    reasons: tuple[str, ...]
    complete: bool = True
    """Whether the whole file was read; when not (``count_all=False``), ``matching``,
    ``rollouts`` and ``reasons`` cover the part read, and more rollouts match than shown."""


def select_from_file(
    path: str | Path,
    selection: RolloutFilter,
    *,
    limit: int | None = None,
    count_all: bool = True,
) -> FileSelection:
    """``select_rollouts`` over a results file read as a stream: one pass, holding only
    the rollouts kept (at most ``limit``) and the counts, whatever the file's size.

    Rollouts come in file order (complete groups as they were written). Raises
    ``ResultsFileError`` for an unreadable file or line, and ``ValueError`` as
    ``select_rollouts`` does (``selection.key`` not a reward key of the file, reward
    bounds on a file without reward keys). ``count_all=False`` stops reading once one
    more rollout than ``limit`` matches (``complete`` false), for a quick look at a large file.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    _header, groups = iter_lazy_groups(path)
    keys: dict[str, None] = {}
    reasons: set[str] = set()
    shown: list[Trajectory] = []
    matching = total = 0
    for group in groups:
        for line in group:
            keys.update(dict.fromkeys(line.rewards))
            reasons.add(line.termination_reason)
            total += 1
            key = selection.key if selection.key is not None else next(iter(keys), None)
            if selection.matches(line, key):
                matching += 1
                if limit is None or len(shown) < limit:
                    shown.append(line.trajectory())
                elif not count_all and (selection.key is None or selection.key in keys):
                    return FileSelection(
                        tuple(shown), matching, total, tuple(sorted(reasons)), complete=False
                    )
    if selection.key is not None and selection.key not in keys:
        known = ", ".join(keys) or "none"
        raise ValueError(f"reward key {selection.key!r} is not in the results (keys: {known})")
    if selection.bounds_reward and not keys:
        raise ValueError("the results have no reward keys to bound")
    return FileSelection(tuple(shown), matching, total, tuple(sorted(reasons)))
