"""Validation of the rollout record's fields (``benchmax.trajectory``): a constructor
raises ``TypeError`` or ``ValueError`` naming the field that is wrong."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, cast

from benchmax._value_checks import TOKEN_ID_BOUND, is_int_at_least, is_numeric
from benchmax._vocabulary import TOKEN_USAGE_KEYS, TokenUsage


class _ModelCallFields(Protocol):
    """A ``benchmax.trajectory.ModelCall``'s fields as given, before they are checked."""

    @property
    def finish_reason(self) -> object: ...
    @property
    def usage(self) -> object: ...
    @property
    def seconds(self) -> object: ...
    @property
    def message_index(self) -> object: ...
    @property
    def prompt_token_ids(self) -> object: ...
    @property
    def completion_token_ids(self) -> object: ...
    @property
    def completion_logprobs(self) -> object: ...
    @property
    def weights_version(self) -> object: ...


class _ToolCallFields(Protocol):
    """A ``benchmax.trajectory.ToolCallTiming``'s fields as given."""

    @property
    def name(self) -> object: ...
    @property
    def seconds(self) -> object: ...
    @property
    def message_index(self) -> object: ...


class _TrajectoryFields(Protocol):
    """A ``benchmax.trajectory.Trajectory``'s fields as given."""

    @property
    def rollout_id(self) -> object: ...
    @property
    def example_id(self) -> object: ...
    @property
    def termination_reason(self) -> object: ...
    @property
    def rewards(self) -> object: ...
    @property
    def attempt(self) -> object: ...
    @property
    def run_id(self) -> object: ...
    @property
    def split(self) -> object: ...
    @property
    def example_index(self) -> object: ...
    @property
    def group_index(self) -> object: ...
    @property
    def messages(self) -> object: ...
    @property
    def model_calls(self) -> object: ...
    @property
    def tool_calls(self) -> object: ...
    @property
    def timings(self) -> object: ...
    @property
    def usage(self) -> object: ...
    @property
    def logs(self) -> object: ...
    @property
    def annotations(self) -> object: ...
    @property
    def step(self) -> object: ...
    @property
    def weights_version(self) -> object: ...


__all__ = ["check_model_call", "check_token_ids", "check_tool_call", "check_trajectory"]


def _seconds(value: object, name: str) -> float:
    if not is_numeric(value) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _optional_index(value: object, name: str) -> int | None:
    if value is not None and not is_int_at_least(value, 0):
        raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
    return value


def check_token_ids(value: object, name: str) -> tuple[int, ...] | None:
    """``value`` as token ids (``None`` stays ``None``): a list or tuple of integers in
    ``[0, 2**63)``, booleans and floats refused. Raises ``TypeError``/``ValueError``
    naming ``name`` and the first bad item."""
    if value is None:
        return None
    if not isinstance(value, tuple | list):
        raise TypeError(f"{name} must be a sequence of token ids or None")
    ids = tuple(value)
    # One pass in C for the common case (bool is its own type, so it is refused too).
    if ids and (set(map(type, ids)) != {int} or min(ids) < 0 or max(ids) >= TOKEN_ID_BOUND):
        index, bad = next(
            (i, t) for i, t in enumerate(ids) if type(t) is not int or not 0 <= t < TOKEN_ID_BOUND
        )
        raise ValueError(
            f"{name} must hold integers in [0, 2**63), got {_shown(bad)} at index {index}"
        )
    return ids


def _logprobs(value: object, name: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    if not isinstance(value, tuple | list):
        raise TypeError(f"{name} must be a sequence of floats or None")
    logprobs = tuple(value)
    if logprobs and set(map(type, logprobs)) != {float}:
        for index, logprob in enumerate(logprobs):
            if not is_numeric(logprob):
                raise ValueError(
                    f"{name} must hold numbers, got {_shown(logprob)} at index {index}"
                )
        logprobs = tuple(map(_as_float, logprobs))
    # C-speed checks for the common case; a log-probability is finite and never positive.
    if logprobs and (not all(map(math.isfinite, logprobs)) or max(logprobs) > 0.0):
        index, bad = next((i, x) for i, x in enumerate(logprobs) if not math.isfinite(x) or x > 0.0)
        raise ValueError(
            f"{name} must hold finite log-probabilities <= 0, got {bad!r} at index {index}"
        )
    return logprobs


def _as_float(number: float) -> float:
    try:
        return float(number)
    except OverflowError:  # an integer too large for a float: not a log-probability
        return math.inf if number > 0 else -math.inf


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _usage(value: object, name: str) -> TokenUsage | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of token counts or None")
    for key, count in value.items():
        if key not in TOKEN_USAGE_KEYS:
            raise ValueError(f"{name} has unknown key {key!r} (known: {TOKEN_USAGE_KEYS})")
        if not is_int_at_least(count, 0):
            raise ValueError(f"{name}[{key!r}] must be a non-negative integer, got {count!r}")
    return cast(TokenUsage, dict(value))


def _items[T](values: object, kind: type[T], name: str) -> tuple[T, ...]:
    if not isinstance(values, tuple | list):
        raise TypeError(f"{name} must be a sequence of {kind.__name__}")
    for value in values:
        if not isinstance(value, kind):
            raise TypeError(f"{name} must hold {kind.__name__} objects, got {value!r}")
    return tuple(values)


def check_model_call(call: _ModelCallFields) -> None:
    """Validate (and normalize: lists to tuples, numbers to floats) a new ``ModelCall``."""
    if call.finish_reason is not None and not isinstance(call.finish_reason, str):
        raise TypeError("finish_reason must be a string or None")
    set_ = object.__setattr__
    set_(call, "usage", _usage(call.usage, "usage"))
    set_(call, "seconds", _seconds(call.seconds, "seconds"))
    _optional_index(call.message_index, "message_index")
    set_(call, "prompt_token_ids", check_token_ids(call.prompt_token_ids, "prompt_token_ids"))
    completion = check_token_ids(call.completion_token_ids, "completion_token_ids")
    set_(call, "completion_token_ids", completion)
    logprobs = _logprobs(call.completion_logprobs, "completion_logprobs")
    set_(call, "completion_logprobs", logprobs)
    if logprobs is not None and (completion is None or len(logprobs) != len(completion)):
        raise ValueError(
            "completion_logprobs must be aligned with completion_token_ids "
            f"({len(logprobs)} logprobs for "
            f"{'no' if completion is None else len(completion)} completion tokens)"
        )
    version = call.weights_version
    if version is not None and not is_int_at_least(version, 0):
        raise ValueError(f"weights_version must be a non-negative integer or None, got {version!r}")


def check_tool_call(call: _ToolCallFields) -> None:
    """Validate (and normalize: seconds to a float) a new ``ToolCallTiming``."""
    if not isinstance(call.name, str):
        raise TypeError("tool call name must be a string")
    object.__setattr__(call, "seconds", _seconds(call.seconds, "seconds"))
    if not is_int_at_least(call.message_index, 0):
        raise ValueError("message_index must be a non-negative integer")


def check_trajectory(
    trajectory: _TrajectoryFields, model_call: type[object], tool_call: type[object]
) -> None:
    """Validate (and normalize: sequences to tuples) a new ``Trajectory``, whose
    ``model_calls`` must hold ``model_call`` objects and ``tool_calls`` ``tool_call`` ones
    (``ModelCall`` and ``ToolCallTiming``, passed in: this module sits below theirs)."""

    set_ = object.__setattr__
    for name in ("rollout_id", "example_id", "termination_reason"):
        if not isinstance(getattr(trajectory, name), str):
            raise TypeError(f"{name} must be a string")
    if not trajectory.termination_reason:
        raise ValueError("termination_reason must be a non-empty string")
    if not isinstance(trajectory.rewards, Mapping):
        raise TypeError("rewards must be a mapping of reward keys to numbers")
    for key, value in trajectory.rewards.items():
        if not isinstance(key, str) or not is_numeric(value):
            raise ValueError(f"reward {key!r} must be a number, got {value!r}")
    if not is_int_at_least(trajectory.attempt, 0):
        raise ValueError("attempt must be a non-negative integer")
    if trajectory.run_id is not None and not isinstance(trajectory.run_id, str):
        raise TypeError("run_id must be a string or None")
    if not isinstance(trajectory.split, str):
        raise TypeError("split must be a string")
    _optional_index(trajectory.example_index, "example_index")
    if not is_int_at_least(trajectory.group_index, 0):
        raise ValueError("group_index must be a non-negative integer")
    if trajectory.messages is not None:
        if not isinstance(trajectory.messages, tuple | list):
            raise TypeError("messages must be a sequence of message objects or None")
        set_(trajectory, "messages", tuple(trajectory.messages))
    set_(trajectory, "model_calls", _items(trajectory.model_calls, model_call, "model_calls"))
    set_(trajectory, "tool_calls", _items(trajectory.tool_calls, tool_call, "tool_calls"))
    if not isinstance(trajectory.timings, Mapping) or not all(
        isinstance(k, str) and is_numeric(v) for k, v in trajectory.timings.items()
    ):
        raise ValueError("timings must map names to seconds")
    set_(trajectory, "usage", _usage(trajectory.usage, "usage"))
    if not isinstance(trajectory.logs, tuple | list) or not all(
        isinstance(entry, Mapping) for entry in trajectory.logs
    ):
        raise TypeError("logs must be a sequence of log entries")
    set_(trajectory, "logs", tuple(trajectory.logs))
    if not isinstance(trajectory.annotations, Mapping) or not all(
        isinstance(key, str) for key in trajectory.annotations
    ):
        raise TypeError("annotations must be a mapping with string keys")
    for name in ("step", "weights_version"):
        value = getattr(trajectory, name)
        if value is not None and not is_int_at_least(value, 0):
            raise ValueError(f"{name} must be a non-negative integer or None")
