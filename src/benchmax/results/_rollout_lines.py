"""One rollout line of a results file as every reader takes it: the fields every reader
relies on checked (``checked_record``, errors naming ``file:line``), the summary fields
(``SUMMARY_FIELDS``), and the whole record on demand (``LazyRollout``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from benchmax._vocabulary import TOKEN_USAGE_KEYS, TokenUsage
from benchmax.results._errors import ResultsFileError
from benchmax.results._group import TrajectoryGroup
from benchmax.trajectory import Trajectory

__all__ = ["SUMMARY_FIELDS", "LazyRollout", "checked_record", "summary_group"]

SUMMARY_FIELDS = (
    "rollout_id",
    "example_id",
    "group_index",
    "termination_reason",
    "rewards",
    "usage",
)
"""The fields of a rollout line a summary keeps (a resume, ``summary_group``,
``LazyRollout.fields``): never the transcript."""

_FLOAT_MAX = sys.float_info.max


def _identity_problem(record: object) -> str | None:
    """What keeps ``record`` from being placed in its group (a rollout line names its
    example index and attempt), or ``None``."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    if record.get("type") == "header":
        return "a second header line (a results file has one, on its first line)"
    for name in ("example_index", "attempt"):
        if name not in record:
            return f"missing field {name!r}"
        try:
            int(record[name])
        except (TypeError, ValueError):
            return f"{name} is not an integer"
    return None


def _record_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields every reader of a rollout line relies on, or ``None``."""
    for name in ("example_id", "termination_reason"):
        if not isinstance(record.get(name), str):
            return f"{name} is not a string"
    if not record["termination_reason"]:
        return "termination_reason is empty"
    group_index = record.get("group_index")
    if not isinstance(group_index, int) or isinstance(group_index, bool):
        return "group_index is not an integer"
    rewards = record.get("rewards")
    if not isinstance(rewards, Mapping):
        return "rewards is not an object"
    for key, value in rewards.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            return f"reward {key!r} is not a number"
        if isinstance(value, int) and not -_FLOAT_MAX <= value <= _FLOAT_MAX:
            return f"reward {key!r} is too large for a float"
    return None


def summary_group(
    path: Path,
    records: Sequence[Mapping[str, Any]],
    example_index: int,
    attempt: int,
) -> TrajectoryGroup:
    """A complete group from its lines' summary fields (checked by ``checked_record``), in
    group order: each ``Trajectory`` keeps its identity, outcome and usage, no transcript.

    Usage counts a line holds that a ``Trajectory`` cannot (unknown keys, negative or
    non-integer counts: files are data) are left out. Raises ``ResultsFileError`` naming
    the example when a record cannot be a ``Trajectory``.
    """
    try:
        trajectories = tuple(
            Trajectory(
                rollout_id=str(r.get("rollout_id") or ""),
                example_id=r["example_id"],
                termination_reason=r["termination_reason"],
                rewards=r["rewards"],
                attempt=attempt,
                example_index=example_index,
                group_index=r["group_index"],
                usage=_usage(r.get("usage")),
            )
            for r in records
        )
    except (TypeError, ValueError) as error:
        raise ResultsFileError(
            f"{path}: example {example_index} has a damaged record: {error}"
        ) from None
    return TrajectoryGroup(trajectories)


def _usage(value: object) -> TokenUsage | None:
    """The token counts of a line's ``usage`` a ``Trajectory`` accepts (``None``: none)."""
    if not isinstance(value, Mapping):
        return None
    kept = {
        key: count
        for key, count in value.items()
        if key in TOKEN_USAGE_KEYS
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 0
    }
    return cast(TokenUsage, kept)


def checked_record(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    """Line ``number`` of ``path`` as a rollout record whose fields every reader relies on
    are checked; raises ``ResultsFileError`` naming ``file:line`` and what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultsFileError(
            f"{path}:{number} is not UTF-8 (byte {error.start + 1} of the line: {error.reason})"
        ) from None
    try:
        record = json.loads(text)
    except RecursionError:
        raise ResultsFileError(
            f"{path}:{number} is not a rollout record: JSON nested too deeply"
        ) from None
    except ValueError as error:
        raise ResultsFileError(f"{path}:{number} is not a rollout record: {error}") from None
    problem = _identity_problem(record)
    if problem is None:
        problem = _record_problem(record)
    if problem is not None:
        raise ResultsFileError(f"{path}:{number} is not a rollout record: {problem}")
    return cast(dict[str, Any], record)


@dataclass(frozen=True, slots=True)
class LazyRollout:
    """One rollout line of a streamed file: its checked summary fields now, its
    ``Trajectory`` on demand (``trajectory()``), so a scan holds no transcripts."""

    path: Path
    line: int
    raw: bytes
    fields: Mapping[str, Any]

    def __init__(self, path: Path, line: int, raw: bytes, record: Mapping[str, Any]) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "raw", raw)
        summary = {name: record[name] for name in SUMMARY_FIELDS if name in record}
        summary["example_index"] = int(record["example_index"])
        summary["attempt"] = int(record["attempt"])
        object.__setattr__(self, "fields", summary)

    @property
    def termination_reason(self) -> str:
        return str(self.fields["termination_reason"])

    @property
    def example_id(self) -> str:
        return str(self.fields["example_id"])

    @property
    def rewards(self) -> Mapping[str, float]:
        return cast(Mapping[str, float], self.fields["rewards"])

    def trajectory(self) -> Trajectory:
        """The whole record; raises ``ResultsFileError`` naming ``file:line``."""
        try:
            return Trajectory.from_json(json.loads(self.raw))
        except (TypeError, ValueError, RecursionError) as error:
            raise ResultsFileError(
                f"{self.path}:{self.line} is not a rollout record: {error}"
            ) from None
