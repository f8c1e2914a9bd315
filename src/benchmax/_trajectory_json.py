"""A ``Trajectory`` as a results-file line and back (``Trajectory.to_json``/``from_json``).

The model calls are written in order, each token once (a call that continues the
previous call with tokens stores only its added prompt ids, ``ModelCall.to_json``); when
reading, optional parts a hand-edited line got wrong are dropped rather than refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from benchmax._value_checks import is_int_at_least, is_numeric
from benchmax._vocabulary import TOKEN_USAGE_KEYS, TokenUsage

if TYPE_CHECKING:
    from benchmax.trajectory import (
        LogEntry,
        ModelCall,
        ModelCallRecord,
        RolloutRecord,
        RolloutTimings,
        Trajectory,
    )

__all__ = ["read_trajectory", "rollout_record"]


def rollout_record(trajectory: Trajectory) -> RolloutRecord:
    """``trajectory`` as one results-file line (``Trajectory.to_json``)."""
    record: RolloutRecord = {
        "type": "rollout",
        "run_id": trajectory.run_id,
        "split": trajectory.split,
        "example_id": trajectory.example_id,
        "example_index": trajectory.example_index,
        "group_index": trajectory.group_index,
        "rollout_id": trajectory.rollout_id,
        "attempt": trajectory.attempt,
        "termination_reason": trajectory.termination_reason,
        "rewards": dict(trajectory.rewards),
        "timings": cast("RolloutTimings", dict(trajectory.timings)),
        "usage": None if trajectory.usage is None else cast(TokenUsage, dict(trajectory.usage)),
        "transcript": None
        if trajectory.messages is None
        else [dict(m) for m in trajectory.messages],
        "logs": list(trajectory.logs),
        "model_calls": _calls_json(trajectory.model_calls),
        "tool_calls": [call.to_json() for call in trajectory.tool_calls],
    }
    if trajectory.annotations:
        record["annotations"] = dict(trajectory.annotations)
    if trajectory.step is not None:
        record["step"] = trajectory.step
    if trajectory.weights_version is not None:
        record["weights_version"] = trajectory.weights_version
    return record


def read_trajectory(cls: type[Trajectory], data: object) -> Trajectory:
    """The trajectory (a ``cls``) a results line holds (``Trajectory.from_json``)."""
    from benchmax.trajectory import ToolCallTiming  # defined there; imported when used

    if not isinstance(data, Mapping):
        raise TypeError("a rollout record must be a JSON object")
    for name in ("rollout_id", "example_id", "termination_reason"):
        if not isinstance(data.get(name), str):
            raise TypeError(f"{name} is not a string")
    transcript = data.get("transcript")
    return cls(
        rollout_id=data["rollout_id"],
        example_id=data["example_id"],
        termination_reason=data["termination_reason"],
        rewards=_json_rewards(data.get("rewards")),
        attempt=data.get("attempt", 1),
        run_id=data.get("run_id"),
        split=str(data.get("split", "train")),
        example_index=data.get("example_index"),
        group_index=data.get("group_index", 0),
        messages=tuple(transcript) if isinstance(transcript, list) else None,
        model_calls=_calls_from_json(data.get("model_calls")),
        tool_calls=tuple(ToolCallTiming.from_json(c) for c in data.get("tool_calls") or ()),
        timings=_json_timings(data.get("timings")),
        usage=_json_usage(data.get("usage")),
        logs=tuple(cast("LogEntry", e) for e in data.get("logs") or () if isinstance(e, Mapping)),
        annotations=_json_object(data.get("annotations")),
        step=_json_count(data.get("step")),
        weights_version=_json_count(data.get("weights_version")),
    )


def _calls_json(calls: tuple[ModelCall, ...]) -> list[ModelCallRecord]:
    lines = []
    previous: ModelCall | None = None
    for call in calls:
        lines.append(call.to_json(previous))
        if call.has_tokens:
            previous = call
    return lines


def _calls_from_json(data: object) -> tuple[ModelCall, ...]:
    from benchmax.trajectory import ModelCall  # defined there; imported when used

    if not data:
        return ()
    if not isinstance(data, list):
        raise TypeError("model_calls must be a list")
    calls = []
    previous: ModelCall | None = None
    for index, line in enumerate(data):
        try:
            call = ModelCall.from_json(line, previous)
        except (TypeError, ValueError) as error:
            raise type(error)(f"model_calls[{index}]: {error}") from None
        calls.append(call)
        if call.has_tokens:
            previous = call
    return tuple(calls)


def _json_rewards(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise TypeError("rewards is not an object")
    return dict(value)


def _json_timings(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and is_numeric(v)}


def _json_usage(value: object) -> TokenUsage | None:
    if not isinstance(value, Mapping):
        return None
    kept = {k: v for k, v in value.items() if k in TOKEN_USAGE_KEYS and is_int_at_least(v, 0)}
    return cast(TokenUsage, kept) if kept else None


def _json_count(value: object) -> int | None:
    return value if is_int_at_least(value, 0) else None


def _json_object(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items()}
