"""Contract types shared by every environment: examples, requests, attempts, outcomes.

Termination reasons are open-ended strings; the ones this library and its adapters
produce are the ``Final`` constants below (``FINISHED``, ``MODEL_ERROR``, ...) and the
``TerminationReason`` literal type that lists them, defined once in
``benchmax._vocabulary`` and re-exported here. They are importable from this module
but, like the rest of its helpers, not part of ``__all__`` (the 0.2 contract fixes
that list).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmax._sampling_args import validated_sampling_args
from benchmax._url_credentials import masked_url
from benchmax._value_checks import check_non_empty_str, is_non_empty_str, is_numeric
from benchmax.auth import ModelAuth
from benchmax.envs.errors import EnvError

# isort: off
from benchmax._vocabulary import (  # re-exported: importable from here by name
    CONTENT_FILTER as CONTENT_FILTER,
    CONTEXT_EXCEEDED as CONTEXT_EXCEEDED,
    FINISHED as FINISHED,
    GROUP_REWARD_ERROR as GROUP_REWARD_ERROR,
    HARNESS_ERROR as HARNESS_ERROR,
    HARNESS_TIMEOUT as HARNESS_TIMEOUT,
    JUDGE_ERROR as JUDGE_ERROR,
    LEFTOVER_PROCESS as LEFTOVER_PROCESS,
    MAX_TURNS_EXCEEDED as MAX_TURNS_EXCEEDED,
    MODEL_ERROR as MODEL_ERROR,
    MODEL_TIMEOUT as MODEL_TIMEOUT,
    NO_MODEL_CALL as NO_MODEL_CALL,
    OUTPUT_EXCEEDED as OUTPUT_EXCEEDED,
    REWARD_ERROR as REWARD_ERROR,
    REWARD_TIMEOUT as REWARD_TIMEOUT,
    ROLLOUT_TIMEOUT as ROLLOUT_TIMEOUT,
    SANDBOX_ERROR as SANDBOX_ERROR,
    SETUP_ERROR as SETUP_ERROR,
    SIMULATED_USER_ERROR as SIMULATED_USER_ERROR,
    STDOUT_EXCEEDED as STDOUT_EXCEEDED,
    TOOL_BUDGET_EXCEEDED as TOOL_BUDGET_EXCEEDED,
    TOOL_ERROR as TOOL_ERROR,
    TOOL_TIMEOUT as TOOL_TIMEOUT,
    UNKNOWN as UNKNOWN,
    VERIFIER_ERROR as VERIFIER_ERROR,
    VERIFIER_TIMEOUT as VERIFIER_TIMEOUT,
    WRONG_MODEL as WRONG_MODEL,
    TerminationReason as TerminationReason,
)
# isort: on

__all__ = [
    "DatasetSplit",
    "Example",
    "RewardMap",
    "RolloutAttempt",
    "RolloutFailure",
    "RolloutOutcome",
    "RolloutRequest",
]

DatasetSplit = Literal["train", "eval"]


type RewardMap = Mapping[str, float]


class RewardShapeError(EnvError, ValueError):
    """A reward map's keys differ from the environment's ``reward_keys`` (a
    ``ValueError``, as in 0.2; its own class so validation can name the mismatch)."""


def _validate_reward_map(rewards: object) -> None:
    if not isinstance(rewards, Mapping):
        raise TypeError("rewards must be a mapping")
    if not rewards:
        raise ValueError("rewards must contain the env's reward keys")
    for key, value in rewards.items():
        if not is_non_empty_str(key):
            raise ValueError("reward keys must be non-empty strings")
        if not is_numeric(value):
            raise ValueError(f"reward {key!r} must be numeric")
        # Integers are always finite (and may be too large for ``math.isfinite``).
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"reward {key!r} must be finite")


def _validate_termination_reason(reason: object) -> None:
    if not is_non_empty_str(reason):
        raise ValueError("termination_reason must be a non-empty string")


class RolloutFailure(EnvError, RuntimeError):
    """An operational failure that settles one rollout as a zero-reward outcome."""

    termination_reason: str

    def __init__(self, termination_reason: str, message: str) -> None:
        _validate_termination_reason(termination_reason)
        if termination_reason == FINISHED:
            raise ValueError("a rollout failure cannot terminate as 'finished'")
        super().__init__(message)
        self.termination_reason = termination_reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_rollout_failure,
            (type(self), self.termination_reason, self.args),
            self.__dict__ or None,
        )


def _rebuild_rollout_failure(
    cls: type[RolloutFailure], termination_reason: str, args: tuple[Any, ...]
) -> RolloutFailure:
    failure = cls.__new__(cls)
    failure.args = args
    failure.termination_reason = termination_reason
    return failure


@dataclass(frozen=True, slots=True)
class Example[Payload]:
    """One dataset example: a stable id and an opaque payload."""

    id: str
    payload: Payload

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.id):
            raise ValueError("example id must be a non-empty string")


@dataclass(frozen=True, slots=True, repr=False)
class RolloutRequest[Payload]:
    """Everything one rollout needs: the example, the model endpoint and its auth.

    ``sampling_args`` (beyond 0.2) are extra chat-completions body fields for this
    rollout (``temperature``, ``max_tokens``, ``seed``, server-specific fields);
    they override the run's and the environment's. The repr never shows
    ``model_auth`` (nor a password in ``base_url``: ``user:***@``), and shows
    ``sampling_args`` only when some are set.
    """

    rollout_id: str
    example: Example[Payload]
    model: str
    base_url: str
    model_auth: ModelAuth
    split: DatasetSplit = "train"
    sampling_args: Mapping[str, Any] = field(default_factory=dict)
    record_tokens: bool = False

    def __repr__(self) -> str:
        text = (
            f"{type(self).__qualname__}(rollout_id={self.rollout_id!r}, "
            f"example={self.example!r}, model={self.model!r}, "
            f"base_url={masked_url(self.base_url)!r}, "
            f"split={self.split!r}"
        )
        if self.sampling_args:
            text += f", sampling_args={self.sampling_args!r}"
        if self.record_tokens:
            text += ", record_tokens=True"
        return text + ")"

    def __post_init__(self) -> None:
        check_non_empty_str(self.rollout_id, "rollout_id")
        check_non_empty_str(self.model, "model")
        check_non_empty_str(self.base_url, "base_url")
        if not isinstance(self.model_auth, ModelAuth):
            raise TypeError("model_auth must implement ModelAuth")
        if self.split not in ("train", "eval"):
            raise ValueError("split must be 'train' or 'eval'")
        object.__setattr__(self, "sampling_args", validated_sampling_args(self.sampling_args))
        if not isinstance(self.record_tokens, bool):
            raise TypeError("record_tokens must be True or False")


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutAttempt:
    """One completed physical execution, before group rewards are merged."""

    rollout_id: str
    termination_reason: str
    rewards: RewardMap | None = None

    def __post_init__(self) -> None:
        check_non_empty_str(self.rollout_id, "rollout_id")
        _validate_termination_reason(self.termination_reason)
        if self.rewards is not None:
            _validate_reward_map(self.rewards)


@dataclass(frozen=True, slots=True)
class RolloutOutcome:
    """The final result of one rollout: named rewards and why it ended."""

    rewards: RewardMap
    termination_reason: str

    def __post_init__(self) -> None:
        _validate_termination_reason(self.termination_reason)
        _validate_reward_map(self.rewards)
