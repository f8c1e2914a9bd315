"""Tests for ``Environment`` and its group executor ``run_group``.

Every environment here is a small hand-written in-process subclass; no model
server is involved.
"""

from __future__ import annotations

import asyncio
import logging
import math
import pickle
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.logging import _CURRENT_GROUP_RIDS, _CURRENT_ROLLOUT_ID
from benchmax.envs.shared_types import (
    DatasetSplit,
    Example,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
)

LOGGER = "benchmax.envs.environment"

Payload = dict[str, Any]
Rollout = Callable[[RolloutRequest[Payload]], Awaitable[Any]]
GroupHook = Callable[[Sequence[RolloutAttempt]], Awaitable[Any]]


class ScriptedEnv(Environment[Payload, RolloutAttempt]):
    """Runs ``rollout`` for every request and ``group`` as the group hook.

    Deliberately does not call ``super().__init__()``.
    """

    def __init__(
        self, rollout: Rollout, *, keys: Any = ("correct",), group: GroupHook | None = None
    ) -> None:
        self._rollout = rollout
        self._keys = keys
        self._group = group
        self.requests: list[RolloutRequest[Payload]] = []
        self.group_calls: list[tuple[list[RolloutAttempt], tuple[str, ...] | None]] = []

    @property
    def reward_keys(self) -> Sequence[str]:
        return self._keys

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[Payload]:
        return Dataset([])

    async def run_rollout(self, request: RolloutRequest[Payload]) -> RolloutAttempt:
        self.requests.append(request)
        return await self._rollout(request)

    async def compute_group_rewards(
        self, rollouts: Sequence[RolloutAttempt]
    ) -> Mapping[str, RewardMap] | None:
        self.group_calls.append((list(rollouts), _CURRENT_GROUP_RIDS.get()))
        if self._group is None:
            return None
        return await self._group(rollouts)


class JudgeLikeError(RolloutFailure):
    """Shaped like ``benchmax.rewards.JudgeError``: one argument, fixed reason."""

    def __init__(self, message: str) -> None:
        super().__init__("judge_error", message)


def make_requests(
    count: int = 2, *, example_id: str = "e", split: DatasetSplit = "train"
) -> list[RolloutRequest[Payload]]:
    example = Example(id=example_id, payload={"q": 1})
    return [
        RolloutRequest(
            rollout_id=f"rollout-{i}",
            example=example,
            model="m",
            base_url=f"http://127.0.0.1:1/sessions/s{i}/v1",
            model_auth=StaticBearerAuth(f"key-{i}"),
            split=split,
        )
        for i in range(count)
    ]


def attempt(
    request: RolloutRequest[Payload], reason: str = "finished", **rewards: float
) -> RolloutAttempt:
    return RolloutAttempt(
        rollout_id=request.rollout_id, termination_reason=reason, rewards=rewards or None
    )


async def correct(request: RolloutRequest[Payload]) -> RolloutAttempt:
    return attempt(request, correct=1.0)


def zeros(*keys: str) -> dict[str, float]:
    return dict.fromkeys(keys, 0.0)


def records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, BaseException | None]]:
    return [
        (r.levelname, r.getMessage(), r.exc_info[1] if r.exc_info else None)
        for r in caplog.records
        if r.name == LOGGER
    ]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)


# Class surface ---------------------------------------------------------------


def test_abstract_members_and_defaults() -> None:
    assert Environment.__abstractmethods__ == frozenset(
        {"reward_keys", "create_dataset", "run_rollout"}
    )
    assert ScriptedEnv.__abstractmethods__ == frozenset()
    with pytest.raises(TypeError):
        Environment()  # type: ignore[abstract]

    class ClassAttributeKeys(Environment[Payload, RolloutAttempt]):
        reward_keys = ("a",)

        async def create_dataset(
            self, split: DatasetSplit, base_dir: Path
        ) -> Dataset[Payload]:  # override without max_examples is fine
            return Dataset([])

        async def run_rollout(self, request: RolloutRequest[Payload]) -> RolloutAttempt:
            return attempt(request, a=1.0)

    assert ClassAttributeKeys.__abstractmethods__ == frozenset()
    env = ClassAttributeKeys()
    assert env.requires_public_model_endpoint is False
    assert Environment.__module__ == "benchmax.envs.environment"


async def test_default_hooks() -> None:
    env = ScriptedEnv(correct)
    assert await Environment.compute_group_rewards(env, []) is None
    assert await env.aclose() is None


# Concurrency, ordering, contexts ---------------------------------------------


async def test_rollouts_run_concurrently_and_results_follow_request_order() -> None:
    count = 5
    barrier = asyncio.Barrier(count)
    finish_order: list[str] = []
    finished = [asyncio.Event() for _ in range(count)]

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        await barrier.wait()  # deadlocks unless all rollouts are in flight together
        index = int(request.rollout_id.rsplit("-", 1)[1])
        if index + 1 < count:  # finish in reverse order: each waits for the next one
            await finished[index + 1].wait()
        finish_order.append(request.rollout_id)
        finished[index].set()
        return attempt(request, correct=float(index))

    requests = make_requests(count)
    async with asyncio.timeout(30):
        outcomes = await ScriptedEnv(rollout).run_group(requests)
    ids = [r.rollout_id for r in requests]
    assert finish_order == ids[::-1]
    assert type(outcomes) is dict
    assert list(outcomes) == ids
    assert [o.rewards for o in outcomes.values()] == [{"correct": float(i)} for i in range(count)]
    assert all(o.termination_reason == "finished" for o in outcomes.values())


async def test_run_rollout_receives_the_original_requests() -> None:
    requests = make_requests(3)
    env = ScriptedEnv(correct)
    await env.run_group(requests)
    assert sorted(env.requests, key=lambda r: r.rollout_id) == requests
    for request in requests:
        assert any(seen is request for seen in env.requests)
    assert len({r.base_url for r in env.requests}) == 3


async def test_rollout_id_context_and_task_name_inside_run_rollout() -> None:
    seen: dict[str, tuple[str | None, str | None, str]] = {}

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        before = _CURRENT_ROLLOUT_ID.get()
        await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        seen[request.rollout_id] = (before, _CURRENT_ROLLOUT_ID.get(), task.get_name())
        return attempt(request, correct=1.0)

    await ScriptedEnv(rollout).run_group(make_requests(2))
    assert seen == {
        "rollout-0": ("rollout-0", "rollout-0", "benchmax-rollout-rollout-0"),
        "rollout-1": ("rollout-1", "rollout-1", "benchmax-rollout-rollout-1"),
    }
    assert _CURRENT_ROLLOUT_ID.get() is None


async def test_group_hook_gets_finished_attempts_in_request_order() -> None:
    returned: dict[str, RolloutAttempt] = {}

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-1":
            raise RolloutFailure("sandbox_error", "sandbox crashed")
        index = int(request.rollout_id[-1])
        await asyncio.sleep(0.001 * (4 - index))  # complete out of order
        returned[request.rollout_id] = attempt(request)  # rewards=None: group-only
        return returned[request.rollout_id]

    async def group(rollouts: Sequence[RolloutAttempt]) -> Mapping[str, RewardMap]:
        assert _CURRENT_ROLLOUT_ID.get() is None
        return {r.rollout_id: {"rank": float(i)} for i, r in enumerate(rollouts)}

    env = ScriptedEnv(rollout, keys=("rank",), group=group)
    outcomes = await env.run_group(make_requests(4))
    [(attempts, group_ids)] = env.group_calls
    assert [a.rollout_id for a in attempts] == ["rollout-0", "rollout-2", "rollout-3"]
    assert all(a is returned[a.rollout_id] for a in attempts)
    assert group_ids == ("rollout-0", "rollout-2", "rollout-3")
    assert _CURRENT_GROUP_RIDS.get() is None
    assert outcomes == {
        "rollout-0": RolloutOutcome({"rank": 0.0}, "finished"),
        "rollout-1": RolloutOutcome({"rank": 0.0}, "sandbox_error"),
        "rollout-2": RolloutOutcome({"rank": 1.0}, "finished"),
        "rollout-3": RolloutOutcome({"rank": 2.0}, "finished"),
    }


async def test_individual_and_group_rewards_merge_individual_first() -> None:
    async def group(rollouts: Sequence[RolloutAttempt]) -> Mapping[str, RewardMap]:
        return {r.rollout_id: {"bonus": 2} for r in rollouts}

    env = ScriptedEnv(correct, keys=("bonus", "correct"), group=group)
    outcomes = await env.run_group(make_requests(2))
    for outcome in outcomes.values():
        assert list(outcome.rewards.items()) == [("correct", 1.0), ("bonus", 2)]


async def test_group_hook_not_called_without_finished_attempts() -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        raise RolloutFailure("sandbox_error", "down")

    env = ScriptedEnv(rollout)
    outcomes = await env.run_group(make_requests(2))
    assert env.group_calls == []
    assert {o.termination_reason for o in outcomes.values()} == {"sandbox_error"}


# Operational failures --------------------------------------------------------


async def test_rollout_failure_settles_only_that_rollout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failure = RolloutFailure("sandbox_error", "sandbox crashed")

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-1":
            raise failure
        await asyncio.sleep(0.01)
        return attempt(request, correct=1.0, style=0.5)

    env = ScriptedEnv(rollout, keys=("correct", "style"))
    outcomes = await env.run_group(make_requests(2))
    assert outcomes["rollout-0"] == RolloutOutcome({"correct": 1.0, "style": 0.5}, "finished")
    assert outcomes["rollout-1"] == RolloutOutcome(zeros("correct", "style"), "sandbox_error")
    assert list(outcomes["rollout-1"].rewards) == ["correct", "style"]
    assert records(caplog) == [
        (
            "ERROR",
            "benchmax.rollout.failed rollout_id=rollout-1 "
            "termination_reason=sandbox_error: sandbox crashed",
            failure,
        )
    ]
    assert "sandbox crashed" in caplog.text


async def test_rollout_failure_subclass_is_accepted_and_pickles() -> None:
    error = JudgeLikeError("judge unavailable")
    for dumps in (pickle.dumps, cloudpickle.dumps):
        restored = pickle.loads(dumps(error))
        assert type(restored) is JudgeLikeError
        assert (str(restored), restored.termination_reason) == ("judge unavailable", "judge_error")
    restored = pickle.loads(cloudpickle.dumps(error))

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-0":
            raise restored  # e.g. an error that crossed a process boundary
        return attempt(request, correct=1.0)

    outcomes = await ScriptedEnv(rollout).run_group(make_requests(2))
    assert outcomes["rollout-0"] == RolloutOutcome(zeros("correct"), "judge_error")
    assert outcomes["rollout-1"] == RolloutOutcome({"correct": 1.0}, "finished")


async def test_group_hook_crash_settles_finished_rollouts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crash = RuntimeError("group hook exploded")

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-2":
            return attempt(request, "context_exceeded", correct=0.0)
        return attempt(request, correct=1.0)

    async def group(rollouts: Sequence[RolloutAttempt]) -> None:
        raise crash

    outcomes = await ScriptedEnv(rollout, group=group).run_group(make_requests(3))
    assert outcomes == {
        "rollout-0": RolloutOutcome(zeros("correct"), "group_reward_error"),
        "rollout-1": RolloutOutcome(zeros("correct"), "group_reward_error"),
        "rollout-2": RolloutOutcome(zeros("correct"), "context_exceeded"),
    }
    assert records(caplog)[-1] == (
        "ERROR",
        "benchmax.rollout.failed rollout_id=group "
        "termination_reason=group_reward_error: group hook exploded",
        crash,
    )


@pytest.mark.parametrize(
    "failure",
    [RolloutFailure("judge_error", "judge timed out"), JudgeLikeError("judge timed out")],
)
async def test_group_hook_rollout_failure_uses_its_reason(
    caplog: pytest.LogCaptureFixture, failure: RolloutFailure
) -> None:
    async def group(rollouts: Sequence[RolloutAttempt]) -> None:
        raise failure

    outcomes = await ScriptedEnv(correct, group=group).run_group(make_requests(2))
    assert all(o == RolloutOutcome(zeros("correct"), "judge_error") for o in outcomes.values())
    assert records(caplog) == [
        (
            "ERROR",
            "benchmax.rollout.failed rollout_id=group termination_reason=judge_error: "
            "judge timed out",
            failure,
        )
    ]


# Contract errors -------------------------------------------------------------


async def test_contract_error_raised_after_siblings_settle() -> None:
    error = KeyError("broken environment")
    sibling_done = asyncio.Event()

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-0":
            raise error
        await asyncio.sleep(0.02)
        sibling_done.set()
        return attempt(request, correct=1.0)

    with pytest.raises(KeyError) as info:
        await ScriptedEnv(rollout).run_group(make_requests(2))
    assert info.value is error
    assert sibling_done.is_set()


async def test_first_contract_error_in_request_order_wins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = ValueError("first by request order")
    second = LookupError("second by request order")

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-0":
            await asyncio.sleep(0.02)  # fails last in time
            raise first
        if request.rollout_id == "rollout-1":
            raise second
        raise RolloutFailure("sandbox_error", "gone")

    with pytest.raises(ValueError) as info:
        await ScriptedEnv(rollout).run_group(make_requests(3))
    assert info.value is first
    assert records(caplog) == [
        (
            "ERROR",
            "benchmax.rollout.failed rollout_id=rollout-2 termination_reason=sandbox_error: gone",
            records(caplog)[0][2],
        ),
        ("ERROR", "additional rollout contract error: second by request order", second),
    ]


async def test_wrong_result_type_is_a_contract_error() -> None:
    async def rollout(request: RolloutRequest[Payload]) -> Any:
        return {"rollout_id": request.rollout_id}

    with pytest.raises(TypeError, match=r"^run_rollout returned dict, expected RolloutAttempt$"):
        await ScriptedEnv(rollout).run_group(make_requests(1))


async def test_wrong_rollout_id_is_a_contract_error() -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        return RolloutAttempt(rollout_id="other", termination_reason="finished")

    with pytest.raises(
        ValueError,
        match=r"^run_rollout returned the wrong rollout ID: expected 'rollout-0', got 'other'$",
    ):
        await ScriptedEnv(rollout).run_group(make_requests(1))


async def test_child_cancellation_is_a_contract_error() -> None:
    completed: list[str] = []

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-0":
            raise asyncio.CancelledError
        await asyncio.sleep(0.01)
        completed.append(request.rollout_id)
        return attempt(request, correct=1.0)

    with pytest.raises(asyncio.CancelledError):
        await ScriptedEnv(rollout).run_group(make_requests(2))
    assert completed == ["rollout-1"]


# Group and reward-key validation ---------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda rs: [], "rollout group must contain at least one request"),
        (lambda rs: [rs[0], rs[0]], "rollout group contains duplicate rollout IDs"),
        (
            lambda rs: [rs[0], make_requests(2, example_id="other")[1]],
            "all rollout requests in a group must use one example",
        ),
        (
            lambda rs: [rs[0], make_requests(2, split="eval")[1]],
            "all rollout requests in a group must use one split",
        ),
    ],
)
async def test_group_validation_runs_nothing(
    mutate: Callable[[list[RolloutRequest[Payload]]], list[RolloutRequest[Payload]]],
    message: str,
) -> None:
    env = ScriptedEnv(correct, keys=set())  # invalid keys too: group checks come first
    with pytest.raises(ValueError, match=f"^{message}$"):
        await env.run_group(mutate(make_requests(2)))
    assert env.requests == []


@pytest.mark.parametrize(
    ("keys", "error", "message"),
    [
        ("correct", TypeError, "reward_keys must be a sequence of strings"),
        (b"correct", TypeError, "reward_keys must be a sequence of strings"),
        ({"correct"}, TypeError, "reward_keys must be a sequence of strings"),
        (None, TypeError, "reward_keys must be a sequence of strings"),
        ((), ValueError, "reward_keys must declare at least one reward"),
        (("correct", ""), ValueError, "reward_keys must contain non-empty strings"),
        (("correct", " "), ValueError, "reward_keys must contain non-empty strings"),
        (("correct", 1), ValueError, "reward_keys must contain non-empty strings"),
        (("correct", "correct"), ValueError, "reward_keys must not contain duplicates"),
    ],
)
async def test_reward_key_validation_runs_nothing(
    keys: object, error: type[Exception], message: str
) -> None:
    env = ScriptedEnv(correct, keys=keys)
    with pytest.raises(error, match=f"^{message}$"):
        await env.run_group(make_requests(2))
    assert env.requests == []


async def test_reward_keys_read_once_and_any_sequence_accepted() -> None:
    reads: list[int] = []

    class CountingKeys(ScriptedEnv):
        @property
        def reward_keys(self) -> Sequence[str]:
            reads.append(1)
            return ["correct"]

    outcomes = await CountingKeys(correct).run_group(make_requests(2))
    assert len(reads) == 1
    assert outcomes["rollout-0"].rewards == {"correct": 1.0}


# Group reward defects --------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "logged"),
    [
        (
            {"rollout-0": {"correct": 1.0}},
            "compute_group_rewards returned misaligned rollout IDs: "
            "missing=['rollout-1'], unknown=[]",
        ),
        (
            {"rollout-0": {}, "rollout-1": {}, "unknown-rollout": {}},
            "compute_group_rewards returned misaligned rollout IDs: "
            "missing=[], unknown=['unknown-rollout']",
        ),
        ([("rollout-0", {})], "compute_group_rewards must return a mapping or None"),
        (
            {"rollout-0": {}, "rollout-1": {}, 7: {}},
            "compute_group_rewards keys must be rollout ID strings",
        ),
        (
            {"rollout-0": {}, "rollout-1": 1.0},
            "compute_group_rewards values must be reward mappings",
        ),
        (
            {"rollout-0": {"correct": 0.5}, "rollout-1": {}},
            "individual and group rewards contain duplicate keys for rollout "
            "'rollout-0': ['correct']",
        ),
        (
            {"rollout-0": {}, "rollout-1": {"extra": 1.0}},
            "rollout 'rollout-1' has the wrong reward shape: missing=[], unknown=['extra']",
        ),
    ],
)
async def test_group_result_defects_settle_as_group_reward_error(
    caplog: pytest.LogCaptureFixture, result: Any, logged: str
) -> None:
    async def group(rollouts: Sequence[RolloutAttempt]) -> Any:
        return result

    env = ScriptedEnv(correct, group=group)
    outcomes = await env.run_group(make_requests(2))
    assert outcomes == {
        "rollout-0": RolloutOutcome(zeros("correct"), "group_reward_error"),
        "rollout-1": RolloutOutcome(zeros("correct"), "group_reward_error"),
    }
    [(level, message, exc)] = records(caplog)
    assert level == "ERROR"
    assert message == (
        f"benchmax.rollout.failed rollout_id=group termination_reason=group_reward_error: {logged}"
    )
    assert exc is not None and str(exc) == logged


async def test_finished_attempt_without_any_rewards(caplog: pytest.LogCaptureFixture) -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        return attempt(request)

    outcomes = await ScriptedEnv(rollout, keys=("a", "b")).run_group(make_requests(1))
    assert outcomes == {"rollout-0": RolloutOutcome(zeros("a", "b"), "group_reward_error")}
    assert (
        "rollout 'rollout-0' has no rewards; implement compute_reward or compute_group_rewards"
        in records(caplog)[0][1]
    )


async def test_finished_attempt_with_undeclared_keys(caplog: pytest.LogCaptureFixture) -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        return attempt(request, surprise=1.0)

    outcomes = await ScriptedEnv(rollout, keys=("a", "b")).run_group(make_requests(1))
    assert outcomes == {"rollout-0": RolloutOutcome(zeros("a", "b"), "group_reward_error")}
    assert list(outcomes["rollout-0"].rewards) == ["a", "b"]
    assert (
        "rollout 'rollout-0' has the wrong reward shape: missing=['a', 'b'], unknown=['surprise']"
        in records(caplog)[0][1]
    )


# beyond.md §7 changed the 0.2 row (nan -> "reward 'bonus' must be finite" raised out of
# run_group): a non-finite group value is now group_reward_error (test below).
@pytest.mark.parametrize(
    ("value", "message"),
    [(True, "reward 'bonus' must be numeric"), ("1", "reward 'bonus' must be numeric")],
)
async def test_invalid_group_values_raise_outside_the_protection(
    value: object, message: str
) -> None:
    async def group(rollouts: Sequence[RolloutAttempt]) -> Mapping[str, Any]:
        return {r.rollout_id: {"bonus": value} for r in rollouts}

    env = ScriptedEnv(correct, keys=("correct", "bonus"), group=group)
    with pytest.raises(ValueError, match=message) as raised:
        await env.run_group(make_requests(2))
    assert raised.value.__notes__ == ["benchmax: raised by ScriptedEnv.compute_group_rewards"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
async def test_non_finite_group_value_is_group_reward_error(
    value: float, caplog: pytest.LogCaptureFixture
) -> None:
    async def group(rollouts: Sequence[RolloutAttempt]) -> Mapping[str, Any]:
        return {
            r.rollout_id: {"bonus": value if r.rollout_id == "rollout-1" else 0.5} for r in rollouts
        }

    env = ScriptedEnv(correct, keys=("correct", "bonus"), group=group)
    outcomes = await env.run_group(make_requests(2))
    assert outcomes == {
        rid: RolloutOutcome(zeros("correct", "bonus"), "group_reward_error")
        for rid in ("rollout-0", "rollout-1")
    }
    ((level, message, error),) = records(caplog)
    assert level == "ERROR"
    assert message == (
        "benchmax.rollout.failed rollout_id=group termination_reason=group_reward_error: "
        "compute_group_rewards returned a non-finite value for rollout 'rollout-1': "
        f"reward 'bonus' is {value!r}"
    )
    assert isinstance(error, ValueError)


async def test_non_finite_group_value_beside_a_non_numeric_one_stays_a_contract_error() -> None:
    async def group(rollouts: Sequence[RolloutAttempt]) -> Mapping[str, Any]:
        return {r.rollout_id: {"bonus": math.nan, "extra": "x"} for r in rollouts}

    env = ScriptedEnv(correct, keys=("correct", "bonus", "extra"), group=group)
    with pytest.raises(ValueError, match="reward 'bonus' must be finite"):
        await env.run_group(make_requests(1))


async def test_exception_from_run_rollout_names_the_hook() -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        raise KeyError("prompt")

    with pytest.raises(KeyError) as raised:
        await ScriptedEnv(rollout).run_group(make_requests(2))
    assert raised.value.__notes__ == ["benchmax: raised by ScriptedEnv.run_rollout"]


async def test_rollout_failure_gets_no_hook_note() -> None:
    failure = RolloutFailure("tool_error", "sandbox gone")

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        raise failure

    outcomes = await ScriptedEnv(rollout).run_group(make_requests(1))
    assert outcomes["rollout-0"].termination_reason == "tool_error"
    assert not hasattr(failure, "__notes__")


# Non-finished attempts -------------------------------------------------------


async def test_valid_non_finished_attempt_is_returned_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-1":
            return attempt(request, "context_exceeded", correct=0.0, style=0)
        return attempt(request, correct=1.0, style=1.0)

    env = ScriptedEnv(rollout, keys=("correct", "style"))
    outcomes = await env.run_group(make_requests(2))
    assert outcomes["rollout-1"] == RolloutOutcome({"correct": 0.0, "style": 0}, "context_exceeded")
    assert outcomes["rollout-0"].termination_reason == "finished"
    assert [a.rollout_id for a in env.group_calls[0][0]] == ["rollout-0"]
    assert records(caplog) == [
        (
            "WARNING",
            "benchmax.rollout.terminated rollout_id=rollout-1 termination_reason=context_exceeded",
            None,
        )
    ]


@pytest.mark.parametrize(
    ("rewards", "message"),
    [
        (
            {"correct": 1.0, "style": 0.0},
            r"^failed rollout 'rollout-0' has non-zero rewards: \['correct'\]$",
        ),
        (
            {"correct": 0.5, "style": -1},
            r"^failed rollout 'rollout-0' has non-zero rewards: \['correct', 'style'\]$",
        ),
        (
            None,
            r"^rollout 'rollout-0' has the wrong reward shape: "
            r"missing=\['correct', 'style'\], unknown=\[\]$",
        ),
        (
            {"correct": 0.0, "other": 0.0},
            r"^rollout 'rollout-0' has the wrong reward shape: "
            r"missing=\['style'\], unknown=\['other'\]$",
        ),
    ],
)
async def test_invalid_non_finished_attempts_raise(
    rewards: dict[str, float] | None, message: str
) -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        return RolloutAttempt(
            rollout_id=request.rollout_id, termination_reason="output_exceeded", rewards=rewards
        )

    with pytest.raises(ValueError, match=message):
        await ScriptedEnv(rollout, keys=("correct", "style")).run_group(make_requests(1))


async def test_non_finished_validation_precedes_collected_contract_errors() -> None:
    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        if request.rollout_id == "rollout-0":
            raise TypeError("contract error from the first rollout")
        return attempt(request, "context_exceeded", correct=1.0)

    with pytest.raises(ValueError, match="non-zero rewards"):
        await ScriptedEnv(rollout).run_group(make_requests(2))


# Cancellation ----------------------------------------------------------------


async def test_cancelling_run_group_cancels_every_rollout() -> None:
    started = asyncio.Barrier(4)  # three rollouts plus the test
    unwound: list[str] = []

    async def rollout(request: RolloutRequest[Payload]) -> RolloutAttempt:
        try:
            await started.wait()
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # slow cleanup must still be awaited
            unwound.append(request.rollout_id)
            raise
        raise AssertionError("unreachable")

    env = ScriptedEnv(rollout)
    group_task = asyncio.create_task(env.run_group(make_requests(3)))
    async with asyncio.timeout(30):
        await started.wait()
    group_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await group_task
    assert sorted(unwound) == ["rollout-0", "rollout-1", "rollout-2"]
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert env.group_calls == []
