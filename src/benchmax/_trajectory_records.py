"""The results-file line of a rollout (``benchmax.results/1``) as typed dicts, re-exported
by ``benchmax.trajectory`` (``Trajectory.to_json`` writes a ``RolloutRecord``)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from benchmax._vocabulary import TokenUsage

__all__ = [
    "BranchCoverageRecord",
    "BranchStart",
    "CoverageRecord",
    "LogEntry",
    "ModelCallRecord",
    "RolloutRecord",
    "RolloutTimings",
    "ToolCallRecord",
]


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


class ModelCallRecord(TypedDict):
    """A model call as a results line holds it (token fields only when recorded)."""

    finish_reason: str | None
    usage: TokenUsage | None
    seconds: float
    message_index: int | None
    prompt_token_ids: NotRequired[list[int]]
    prompt_token_ids_added: NotRequired[list[int]]
    """Instead of ``prompt_token_ids`` when the call continues the previous one: the ids
    after the previous call's prompt + completion ids."""
    completion_token_ids: NotRequired[list[int]]
    completion_logprobs: NotRequired[list[float]]
    weights_version: NotRequired[int]
    """The version of the weights that sampled this call, when the server reported it."""


BranchStart = Literal["first", "history_rewritten", "fork", "retry"]
"""Why a branch of a rollout's model calls began (``benchmax.stitching`` says when each
applies)."""


class BranchCoverageRecord(TypedDict):
    """One branch as the ``coverage`` field of a results line holds it."""

    began: BranchStart
    calls: int
    sampled_tokens: int


class CoverageRecord(TypedDict):
    """The ``coverage`` field of a results-file rollout line (``benchmax.stitching``'s
    ``TokenCoverage.to_json``)."""

    sampled_tokens: int
    trained_tokens: int
    branches: list[BranchCoverageRecord]


class ToolCallRecord(TypedDict):
    """A tool call's timing as a results line holds it."""

    name: str
    seconds: float
    message_index: int


class RolloutRecord(TypedDict):
    """One results-file line (``benchmax.results/1``): a trajectory as JSON.

    ``model_calls``, ``tool_calls`` and ``annotations`` were added later: lines written
    before lack them and read back as empty. ``step`` and ``weights_version`` are only on
    the lines of a training run's rollouts (``benchmax train``).
    """

    type: Literal["rollout"]
    run_id: str | None
    split: str
    example_id: str
    example_index: int | None
    group_index: int
    rollout_id: str
    attempt: int
    termination_reason: str
    rewards: dict[str, float]
    timings: RolloutTimings
    usage: NotRequired[TokenUsage | None]
    transcript: list[dict[str, Any]] | None
    logs: list[LogEntry]
    model_calls: NotRequired[list[ModelCallRecord]]
    tool_calls: NotRequired[list[ToolCallRecord]]
    annotations: NotRequired[dict[str, Any]]
    coverage: NotRequired[CoverageRecord]
    """Only when some model call recorded token ids: sampled tokens, those in training
    samples and the branches (``benchmax.stitching.TokenCoverage``)."""
    step: NotRequired[int]
    weights_version: NotRequired[int]
