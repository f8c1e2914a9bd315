"""The shapes of the lines of a results file (``benchmax.results/1``), as TypedDicts.

The header is defined here; a rollout line is a ``benchmax.trajectory.Trajectory`` as
JSON (``RolloutRecord``, defined with the record in ``benchmax.trajectory``), and
``TokenUsage`` is the shared vocabulary's. The writer, the reader and every command that
reads results (summary, view, show, rescore, compare) use these names, so the format is
written down in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from benchmax._vocabulary import TokenUsage
from benchmax.trajectory import LogEntry, RolloutRecord, RolloutTimings, Trajectory

__all__ = [
    "CompletedGroup",
    "LogEntry",
    "ResultsHeader",
    "RolloutRecord",
    "RolloutTimings",
    "TokenUsage",
    "completed_group",
]


class ResultsHeader(TypedDict):
    """The first line: what defines the run (compared on resume)."""

    type: Literal["header"]
    format: str
    run_id: str
    created_at: str
    benchmax_version: str
    definition: dict[str, Any]
    previous_definitions: NotRequired[list[dict[str, Any]]]
    rescored_from: NotRequired[dict[str, Any]]
    """Set by ``rescore``: the source file's ``path``, ``run_id`` and ``env`` definition."""
    data_dir: NotRequired[str]
    """The absolute data directory (``base_dir``) the file was started with; not part of the
    definition (a resume from a copy of the data elsewhere is the same run). ``rescore``
    reads the examples from it by default."""
    reward_weights: NotRequired[dict[str, float]]
    """The environment's ``reward_weights`` when it sets them (not part of the definition:
    they weigh the scalar reward a trainer sees, not the outcomes); ``view`` shows each
    rollout's weighted scalar and advantage with them."""


@dataclass(frozen=True, slots=True)
class CompletedGroup:
    """The parts of one complete group the summary needs."""

    example_index: int
    example_id: str
    termination_reasons: tuple[str, ...]
    rewards: tuple[Mapping[str, float], ...]
    usage: tuple[Mapping[str, object] | None, ...] | None = None
    """Each rollout's token usage as its line holds it (values unchecked: lines come
    from files); ``None`` for lines written before usage was recorded."""


def completed_group(example_index: int, trajectories: Sequence[Trajectory]) -> CompletedGroup:
    """The summary of one complete group, from its records in group order."""
    return CompletedGroup(
        example_index=example_index,
        example_id=trajectories[0].example_id,
        termination_reasons=tuple(t.termination_reason for t in trajectories),
        rewards=tuple(dict(t.rewards) for t in trajectories),
        usage=tuple(None if t.usage is None else dict(t.usage) for t in trajectories),
    )
