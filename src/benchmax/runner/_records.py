"""The shapes of the lines of a results file (``benchmax.results/1``), as TypedDicts.

The header is defined here; a rollout line is a ``benchmax.trajectory.Trajectory`` as
JSON (``RolloutRecord``, defined with the record in ``benchmax.trajectory``), and
``TokenUsage`` is the shared vocabulary's. The writer, the reader and every command that
reads results (summary, view, show, rescore, compare) use these names, so the format is
written down in one place.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from benchmax._vocabulary import TokenUsage
from benchmax.trajectory import LogEntry, RolloutRecord, RolloutTimings

__all__ = ["LogEntry", "ResultsHeader", "RolloutRecord", "RolloutTimings", "TokenUsage"]


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
