"""The shapes of the lines of a results file (``benchmax.results/1``), as TypedDicts.

The writer, the reader and every command that reads results (summary, view, show,
rescore, compare) use these names, so the format is written down in one place.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["LogEntry", "ResultsHeader", "RolloutRecord", "RolloutTimings", "TokenUsage"]


class TokenUsage(TypedDict, total=False):
    """Tokens one rollout used, summed over its model calls.

    A field is present only when at least one call's reply reported it; a
    rollout whose replies reported no usage at all records ``usage: null``.
    """

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    reasoning_tokens: int
    cached_tokens: int


class RolloutTimings(TypedDict, total=False):
    """Seconds spent on one rollout; the last three only for ``BaseEnv`` rollouts."""

    group_seconds: float
    model_seconds: float
    tool_seconds: float
    reward_seconds: float


class LogEntry(TypedDict):
    """One log record attributed to a rollout (secrets masked)."""

    time: str
    level: str
    logger: str
    message: str
    exception: NotRequired[str]


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


class RolloutRecord(TypedDict):
    """One line per rollout; a group's lines are written together."""

    type: Literal["rollout"]
    run_id: str
    split: str
    example_id: str
    example_index: int
    group_index: int
    rollout_id: str
    attempt: int
    termination_reason: str
    rewards: dict[str, float]
    timings: RolloutTimings
    usage: NotRequired[TokenUsage | None]
    transcript: list[dict[str, Any]] | None
    logs: list[LogEntry]
