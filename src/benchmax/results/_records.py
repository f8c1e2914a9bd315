"""The shapes of the lines of a results file (``benchmax.results/1``), as TypedDicts, and
the ``RunDefinition`` its header is written from.

The header is defined here; a rollout line is a ``benchmax.trajectory.Trajectory`` as
JSON (``RolloutRecord``, defined with the record in ``benchmax.trajectory``), and
``TokenUsage`` is the shared vocabulary's. The writer, the reader and every command that
reads results (summary, view, show, rescore, compare) use these names, so the format is
written down in one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from benchmax._vocabulary import TokenUsage
from benchmax.trajectory import LogEntry, RolloutRecord, RolloutTimings

__all__ = [
    "LogEntry",
    "ResultsHeader",
    "RolloutRecord",
    "RolloutTimings",
    "RunDefinition",
    "TokenUsage",
    "reward_weights_of",
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
class RunDefinition:
    """What defines a run, as its results file's header records it.

    ``fields`` is the header's ``definition`` (environment, split, model, group size, ...:
    compared on resume); ``data_dir`` and ``reward_weights`` are recorded beside it (not
    compared); ``secrets`` are masked in every line written and never shown (``repr``
    leaves them out).

    Raises ``ValueError`` when ``fields`` has no positive integer ``group_size``.
    """

    fields: Mapping[str, Any]
    data_dir: Path | None = None
    reward_weights: Mapping[str, float] | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        size = self.fields.get("group_size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"a run definition needs a positive integer group_size, got {size!r}")
        object.__setattr__(self, "fields", dict(self.fields))
        object.__setattr__(self, "secrets", tuple(s for s in self.secrets if s))

    @property
    def group_size(self) -> int:
        return int(self.fields["group_size"])


def reward_weights_of(header: Mapping[str, object]) -> dict[str, float] | None:
    """The header's ``reward_weights`` when they are a mapping of finite numbers, else
    ``None`` (every key weighs 1.0: the sum of the rewards)."""
    value = header.get("reward_weights")
    if not isinstance(value, Mapping):
        return None
    weights = {str(k): v for k, v in value.items()}
    numbers = all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in weights.values()
    )
    return {k: float(v) for k, v in weights.items()} if numbers else None
