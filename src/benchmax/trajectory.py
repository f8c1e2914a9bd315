"""The rollout record: one :class:`Trajectory` per rollout, one :class:`ModelCall` per model call.

A trajectory is what a rollout did and how it ended: its ids, termination reason and
rewards, the transcript (``messages``), every model call (finish reason, token usage,
seconds, the index of the assistant message it produced and, when a run records tokens,
the exact prompt and completion token ids and completion logprobs the server returned),
every tool call's timing, the rollout's timings, token usage, logs and the
:func:`annotate` data the environment attached. The results file holds one trajectory per
line (:meth:`Trajectory.to_json` / :meth:`Trajectory.from_json`); the runner, ``show``,
``view``, ``compare``, ``rescore``, the Ray executor and ``benchmax.training`` all pass
this one record around.

This module sits low (it imports only benchmax's leaf modules), so environments can use
:func:`annotate`. Records are frozen and validated: a constructor raises ``TypeError`` or
``ValueError`` naming the field that is wrong (the checks live in ``_trajectory_checks``,
the results line's types in ``_trajectory_records``, the lenient reading of its optional
parts in ``_trajectory_json``; none of them imports this module).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from itertools import repeat
from operator import truediv
from types import MappingProxyType
from typing import Any, Final, cast

from benchmax import _context
from benchmax._trajectory_checks import check_model_call, check_tool_call, check_trajectory
from benchmax._trajectory_json import (
    json_count,
    json_object,
    json_rewards,
    json_timings,
    json_usage,
)
from benchmax._trajectory_records import (
    LogEntry,
    ModelCallRecord,
    RolloutRecord,
    RolloutTimings,
    ToolCallRecord,
)
from benchmax._value_checks import is_non_empty_str
from benchmax._vocabulary import TRAINABLE_REASONS, TokenUsage
from benchmax.stitching import Branch, TokenCoverage, stitch_branches

__all__ = [
    "LOGPROB_DECIMALS",
    "LogEntry",
    "ModelCall",
    "RolloutRecord",
    "RolloutTimings",
    "SIMULATED_USER_KEY",
    "ToolCallTiming",
    "Trajectory",
    "annotate",
    "is_simulated_user",
    "recording_annotations",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})

SIMULATED_USER_KEY: Final = "simulated_user"
"""The key marking a transcript message written by a simulated user (``BaseEnv.user_turn``):
``{"role": "user", "content": "...", "simulated_user": true}``. The key stays in the
transcript (results files, reward hooks, ``show``/``view``) but is never sent to the policy
model; the message's tokens are environment tokens (mask 0) in training samples."""

LOGPROB_DECIMALS: Final = 5
"""Decimals of the logprobs a results line stores (an error of at most 5e-6 nats, far
below the usual gap between inference and training engines' logprobs); a 1,000-token
completion's ids and logprobs then take about 15 KB. In memory they stay as sent."""
_LOGPROB_SCALE: Final = 10.0**LOGPROB_DECIMALS


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One chat-completions call of a rollout.

    ``finish_reason`` is the reply's raw ``finish_reason`` (``None`` when the call failed
    or the reply sent none or a non-string); ``usage`` the token counts that reply
    reported (``None``: none); ``seconds`` the time spent waiting on it, retries included;
    ``message_index`` the index in the trajectory's ``messages`` of the assistant message
    it produced (``None`` when it produced none: a failed call or an unusable reply).

    Token data (``None`` when the run did not record tokens): ``prompt_token_ids`` the
    ids of the whole prompt as the server tokenized it (chat template included),
    ``completion_token_ids`` the ids it sampled, ``completion_logprobs`` one logprob per
    completion token, aligned with ``completion_token_ids`` (same length, else
    ``ValueError``). Ids are integers in ``[0, 2**63)`` (an ``int64`` holds them) and
    logprobs finite numbers ``<= 0`` (natural log), else ``ValueError`` naming the field
    and index. Lists given are stored as tuples.

    ``weights_version``: the version of the weights that sampled this call when the server
    said (``benchmax train``'s sampler does: 0 for the base model, one more per optimizer
    step), else ``None``; a non-negative integer, else ``ValueError``. A results line
    holds it only when it is not ``None``.
    """

    finish_reason: str | None = None
    usage: TokenUsage | None = None
    seconds: float = 0.0
    message_index: int | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    completion_logprobs: tuple[float, ...] | None = None
    weights_version: int | None = None
    _follows: tuple[tuple[int, ...], tuple[int, ...], bool] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """What :meth:`continues` established, so it is not compared again: the previous
    call's prompt and completion id tuples (the very objects; tuples are immutable, so an
    identity match means the same content) and whether this call's prompt starts with
    them. Set by :meth:`from_json` (``prompt_token_ids_added`` is built on them) and by
    the first :meth:`continues` with that previous call; dropped by ``replace``."""

    def __post_init__(self) -> None:
        check_model_call(self)

    @property
    def has_tokens(self) -> bool:
        """Whether this call recorded both its prompt and its completion token ids."""
        return self.prompt_token_ids is not None and self.completion_token_ids is not None

    def continues(self, previous: ModelCall) -> bool:
        """Whether this call's prompt ids start with ``previous``'s prompt + completion ids
        (so both calls stitch into one training sequence). ``False`` when either call
        lacks token ids.

        Exact. The first answer for a given ``previous`` compares the ids (time linear in
        the context) and is kept with this call, so asking again (``to_json``,
        ``Trajectory.token_prefix_breaks``, ``to_training_samples``) costs O(1); a call
        read from a results line as ``prompt_token_ids_added`` knows the answer without
        comparing, and ``BaseEnv`` asks when it records the call."""
        prompt, before, sampled = (
            self.prompt_token_ids,
            previous.prompt_token_ids,
            previous.completion_token_ids,
        )
        if prompt is None or before is None or sampled is None:
            return False
        follows = self._follows
        if follows is not None and follows[0] is before and follows[1] is sampled:
            return follows[2]
        split = len(before)
        end = split + len(sampled)
        # The sampled part first: a template that re-renders the previous reply (dropping
        # its reasoning) differs there, so a break is found without reading the context.
        answer = len(prompt) >= end and prompt[split:end] == sampled and prompt[:split] == before
        object.__setattr__(self, "_follows", (before, sampled, answer))
        return answer

    def to_json(self, previous: ModelCall | None = None) -> ModelCallRecord:
        """This call as a results line holds it (token lists only when recorded).

        When this call :meth:`continues` ``previous`` (the rollout's previous call with
        token ids), only the prompt ids past ``previous``'s prompt + completion are
        written, as ``prompt_token_ids_added``: a multi-turn rollout stores each token
        once, not its whole context again with every call."""
        data: ModelCallRecord = {
            "finish_reason": self.finish_reason,
            "usage": None if self.usage is None else cast(TokenUsage, dict(self.usage)),
            "seconds": self.seconds,
            "message_index": self.message_index,
        }
        if previous is not None and self.continues(previous):
            assert previous.prompt_token_ids is not None  # continues() checked both
            assert previous.completion_token_ids is not None
            start = len(previous.prompt_token_ids) + len(previous.completion_token_ids)
            data["prompt_token_ids_added"] = list(self.prompt_token_ids[start:])  # type: ignore[index]
        elif self.prompt_token_ids is not None:
            data["prompt_token_ids"] = list(self.prompt_token_ids)
        if self.completion_token_ids is not None:
            data["completion_token_ids"] = list(self.completion_token_ids)
        if self.completion_logprobs is not None:
            data["completion_logprobs"] = _rounded_logprobs(self.completion_logprobs)
        if self.weights_version is not None:
            data["weights_version"] = self.weights_version
        return data

    @classmethod
    def from_json(cls, data: object, previous: ModelCall | None = None) -> ModelCall:
        """The call a results line holds (``previous``: the rollout's previous call with
        token ids, which ``prompt_token_ids_added`` continues); ``ValueError``/``TypeError``
        naming a bad field."""
        if not isinstance(data, Mapping):
            raise TypeError("a model call must be a JSON object")
        added = data.get("prompt_token_ids_added")
        call = cls(
            finish_reason=data.get("finish_reason"),
            usage=data.get("usage"),
            seconds=data.get("seconds", 0.0),
            message_index=data.get("message_index"),
            prompt_token_ids=data.get("prompt_token_ids") if added is None else added,
            completion_token_ids=data.get("completion_token_ids"),
            completion_logprobs=data.get("completion_logprobs"),
            weights_version=data.get("weights_version"),
        )
        if added is not None:
            if previous is None or previous.prompt_token_ids is None:
                raise ValueError("prompt_token_ids_added without a previous call with tokens")
            assert previous.completion_token_ids is not None  # has tokens: both are set
            # Only the added ids needed checking: the previous call's are valid already.
            before, sampled = previous.prompt_token_ids, previous.completion_token_ids
            prompt = before + sampled + call.prompt_token_ids  # type: ignore[operator]
            object.__setattr__(call, "prompt_token_ids", prompt)
            # Built on them, so it continues them: no comparison needed later.
            object.__setattr__(call, "_follows", (before, sampled, True))
        return call


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallTiming:
    """One tool call of a rollout: the tool's ``name``, the ``seconds`` its ``run_tool``
    took (0 when it did not run: unknown tool, bad arguments) and the index in
    ``messages`` of the tool message answering it."""

    name: str
    seconds: float
    message_index: int

    def __post_init__(self) -> None:
        check_tool_call(self)

    def to_json(self) -> ToolCallRecord:
        return {"name": self.name, "seconds": self.seconds, "message_index": self.message_index}

    @classmethod
    def from_json(cls, data: object) -> ToolCallTiming:
        if not isinstance(data, Mapping):
            raise TypeError("a tool call must be a JSON object")
        return cls(
            name=data.get("name"),  # type: ignore[arg-type]  # checked by __post_init__
            seconds=data.get("seconds", 0.0),
            message_index=data.get("message_index"),  # type: ignore[arg-type]  # checked
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """One rollout as recorded: what it did, how it ended and where it belongs.

    Identity: ``rollout_id``, ``example_id``, ``attempt`` (1 for a group's first run; a
    resumed run's retry of an incomplete group counts up), and for a runner's results
    ``run_id``, ``split``, ``example_index`` (index in the split) and ``group_index`` (the
    rollout's index in its group); ``run_id``/``example_index`` are ``None`` outside a run.

    Outcome: ``termination_reason`` and ``rewards`` (the final ones, group rewards merged).

    What happened: ``messages`` (the transcript: prompt, assistant replies with any
    reasoning fields, tool messages; ``None`` for environments that are not ``BaseEnv``),
    ``model_calls`` (one :class:`ModelCall` per call, in order), ``tool_calls`` (one
    :class:`ToolCallTiming` per tool message), ``timings`` (seconds: ``group_seconds``,
    and for BaseEnv ``model_seconds``, ``tool_seconds``, ``reward_seconds``), ``usage``
    (token counts summed over the calls, ``None``: none reported), ``logs`` (records
    attributed to the rollout, secrets masked) and ``annotations`` (JSON data the
    environment attached with :func:`annotate`).

    Training (``benchmax train``'s rollouts, else ``None``): ``step`` (the optimizer step,
    from 1, whose batch the rollout belongs to) and ``weights_version`` (the version of the
    weights that sampled it: 0 for the base model, counting up with each optimizer step).
    """

    rollout_id: str
    example_id: str
    termination_reason: str
    rewards: Mapping[str, float]
    attempt: int = 1
    run_id: str | None = None
    split: str = "train"
    example_index: int | None = None
    group_index: int = 0
    messages: tuple[Mapping[str, Any], ...] | None = None
    model_calls: tuple[ModelCall, ...] = ()
    tool_calls: tuple[ToolCallTiming, ...] = ()
    timings: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    usage: TokenUsage | None = None
    logs: tuple[LogEntry, ...] = ()
    annotations: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    step: int | None = None
    weights_version: int | None = None

    def __post_init__(self) -> None:
        check_trajectory(self, ModelCall, ToolCallTiming)

    def __reduce__(self) -> tuple[Any, ...]:
        # Read-only mapping views (the empty defaults, a caller's MappingProxyType) do not
        # pickle: send plain dicts, rebuilt (and validated) through the constructor.
        state = {
            item.name: dict(value) if isinstance(value, MappingProxyType) else value
            for item in fields(self)
            if item.init
            for value in (getattr(self, item.name),)
        }
        return (_rebuilt_trajectory, (state,))

    @property
    def trainable(self) -> bool:
        """Whether a trainer should learn from this rollout: its termination reason is in
        ``TRAINABLE_REASONS`` (``finished``, ``max_turns_exceeded``,
        ``tool_budget_exceeded``, ``output_exceeded``); any other reason is an operational
        failure whose zero reward says nothing about the model."""
        return self.termination_reason in TRAINABLE_REASONS

    @property
    def has_tokens(self) -> bool:
        """Whether some model call recorded token ids."""
        return any(call.has_tokens for call in self.model_calls)

    @property
    def branches(self) -> tuple[Branch, ...]:
        """The model calls with token ids stitched into branches, one training sample each
        (``benchmax.stitching``: a call continues the chain whose tip's prompt + completion
        its prompt starts with; any other call begins a branch, with the reason why).
        ``()`` when no call recorded tokens."""
        return stitch_branches(self.model_calls)

    @property
    def coverage(self) -> TokenCoverage | None:
        """How many sampled tokens the rollout's branches hold
        (``benchmax.stitching.TokenCoverage``); ``None`` when no call recorded completion
        token ids. Written to the results line as ``coverage``."""
        if not any(call.completion_token_ids is not None for call in self.model_calls):
            return None
        return TokenCoverage.of(self.model_calls, self.branches)

    @property
    def token_prefix_breaks(self) -> int:
        """How many branches began after the first (see :attr:`branches`): model calls
        whose prompt ids extend no chain's tip, from a chat template that re-renders
        earlier turns, an edited history, a fork or a retried request. Each starts its own
        training sample. 0 when no call recorded tokens."""
        return max(0, len(self.branches) - 1)

    def to_json(self) -> RolloutRecord:
        """This trajectory as one results-file line (a JSON object, before encoding)."""
        record: RolloutRecord = {
            "type": "rollout",
            "run_id": self.run_id,
            "split": self.split,
            "example_id": self.example_id,
            "example_index": self.example_index,
            "group_index": self.group_index,
            "rollout_id": self.rollout_id,
            "attempt": self.attempt,
            "termination_reason": self.termination_reason,
            "rewards": dict(self.rewards),
            "timings": cast(RolloutTimings, dict(self.timings)),
            "usage": None if self.usage is None else cast(TokenUsage, dict(self.usage)),
            "transcript": None if self.messages is None else [dict(m) for m in self.messages],
            "logs": list(self.logs),
            "model_calls": _calls_json(self.model_calls),
            "tool_calls": [call.to_json() for call in self.tool_calls],
        }
        if self.annotations:
            record["annotations"] = dict(self.annotations)
        coverage = self.coverage
        if coverage is not None:
            record["coverage"] = coverage.to_json()
        if self.step is not None:
            record["step"] = self.step
        if self.weights_version is not None:
            record["weights_version"] = self.weights_version
        return record

    @classmethod
    def from_json(cls, data: object) -> Trajectory:
        """The trajectory a results line holds (lines of every ``benchmax.results/1``
        version: fields added later default to empty).

        Optional parts a hand-edited line got wrong are dropped rather than refused:
        a ``usage`` that is not an object, counts that are not non-negative integers,
        timings that are not numbers, log entries that are not objects. Raises
        ``TypeError``/``ValueError`` naming the field when an identity or outcome field
        is missing or malformed.
        """
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
            rewards=json_rewards(data.get("rewards")),
            attempt=data.get("attempt", 1),
            run_id=data.get("run_id"),
            split=str(data.get("split", "train")),
            example_index=data.get("example_index"),
            group_index=data.get("group_index", 0),
            messages=tuple(transcript) if isinstance(transcript, list) else None,
            model_calls=_calls_from_json(data.get("model_calls")),
            tool_calls=_tool_calls_from_json(data.get("tool_calls")),
            timings=json_timings(data.get("timings")),
            usage=json_usage(data.get("usage")),
            logs=tuple(cast(LogEntry, e) for e in data.get("logs") or () if isinstance(e, Mapping)),
            annotations=json_object(data.get("annotations")),
            step=json_count(data.get("step")),
            weights_version=json_count(data.get("weights_version")),
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


def _tool_calls_from_json(data: object) -> tuple[ToolCallTiming, ...]:
    if not data:
        return ()
    if not isinstance(data, list):
        raise TypeError("tool_calls must be a list")
    calls = []
    for index, line in enumerate(data):
        try:
            calls.append(ToolCallTiming.from_json(line))
        except (TypeError, ValueError) as error:
            raise type(error)(f"tool_calls[{index}]: {error}") from None
    return tuple(calls)


def _rounded_logprobs(values: tuple[float, ...]) -> list[float]:
    """``round(x * 10**5) / 10**5`` for each value, in C-level maps: the double nearest
    the 5-decimal value, so it prints short (``-0.06331``)."""
    try:
        scaled = map(round, map(_LOGPROB_SCALE.__mul__, values))
        return list(map(truediv, scaled, repeat(_LOGPROB_SCALE)))
    except (ValueError, OverflowError):  # NaN or infinity: kept as they are
        return [round(x, LOGPROB_DECIMALS) if math.isfinite(x) else x for x in values]


@contextlib.contextmanager
def recording_annotations() -> Iterator[dict[str, Any]]:
    """Collect the :func:`annotate` calls made inside the block (and in tasks it starts)
    into the yielded dict. ``BaseEnv`` wraps each rollout it reports in one; an
    environment that records its own rollouts can do the same."""
    annotations: dict[str, Any] = {}
    token = _context.ANNOTATIONS.set(annotations)
    try:
        yield annotations
    finally:
        _context.ANNOTATIONS.reset(token)


def annotate(key: str, value: Any) -> None:
    """Attach JSON data to the record of the rollout that is running.

    Call it from inside a rollout: a tool, ``compute_reward``, a judge call made from
    ``compute_reward``. The value is stored as a JSON copy under ``key`` in the
    trajectory's ``annotations`` (a later call with the same key replaces it) and written
    to the results file. Outside a rollout that is being recorded (no runner, no
    ``collect_group``) it does nothing.

    Raises ``ValueError`` for an empty ``key`` and, while recording, ``TypeError`` for a
    value JSON cannot represent (checked then, so the failure points at the caller).
    """
    if not is_non_empty_str(key):
        raise ValueError("annotation key must be a non-empty string")
    annotations = _context.ANNOTATIONS.get()
    if annotations is None:
        return
    try:
        copied = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise TypeError(f"annotation {key!r} is not JSON data: {error}") from None
    annotations[key] = copied


def is_simulated_user(message: object) -> bool:
    """Whether a transcript message was written by a simulated user
    (it carries ``SIMULATED_USER_KEY: true``)."""
    return isinstance(message, Mapping) and message.get(SIMULATED_USER_KEY) is True


def _rebuilt_trajectory(state: dict[str, Any]) -> Trajectory:
    """Unpickle a :class:`Trajectory` (see ``Trajectory.__reduce__``)."""
    return Trajectory(**state)
