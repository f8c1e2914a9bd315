"""BaseEnv/BaseRollout class surface, limit validation, preconditions and usage patterns."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from tests.envs.base.support import AnswerEnv, make_request

import benchmax.envs
import benchmax.envs.base
from benchmax.envs.base.env import BaseEnv, BaseRollout
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import RewardMap, RolloutAttempt
from benchmax.testing import MockModelServer


class MinimalEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1
    difficulty = "easy"

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([])


def test_base_package_exports() -> None:
    assert benchmax.envs.base.__all__ == [
        "BaseEnv",
        "BaseRollout",
        "JsonRow",
        "JsonlDataset",
        "Message",
        "Messages",
        "Tool",
        "resolve_dataset_path",
    ]
    assert benchmax.envs.BaseEnv is BaseEnv
    assert BaseEnv.__module__ == "benchmax.envs.base.env"
    assert BaseRollout.__module__ == "benchmax.envs.base.env"
    assert benchmax.envs.base.env.__all__ == ["BaseEnv", "BaseRollout"]


def test_abstract_members_and_defaults() -> None:
    assert BaseEnv.__abstractmethods__ == frozenset({"reward_keys", "create_dataset"})
    assert issubclass(BaseEnv, Environment)
    assert MinimalEnv.__abstractmethods__ == frozenset()
    assert BaseEnv.max_turns is None and BaseEnv.max_tool_calls is None
    assert BaseEnv.model_timeout is None and BaseEnv.tool_timeout is None
    assert BaseEnv.rollout_timeout is None and BaseEnv.model_retries == 0


async def test_default_hooks() -> None:
    env = MinimalEnv()
    assert await env.list_tools() == []
    assert await env.compute_group_rewards([]) is None
    rollout = BaseRollout(
        rollout_id="r", termination_reason="finished", messages=[], example_args={}
    )
    assert await env.compute_reward(rollout) is None
    async with env.rollout_context("r", None) as value:  # type: ignore[arg-type]
        assert value is None
    assert env.requires_public_model_endpoint is False
    await env.aclose()


def test_subclass_with_class_attributes_constructs_and_cloudpickles() -> None:
    env = MinimalEnv()
    assert env.max_turns == 1 and env.difficulty == "easy"
    restored_class = cloudpickle.loads(cloudpickle.dumps(MinimalEnv))
    assert restored_class().max_turns == 1


async def test_env_pickles_after_use(mock_server: MockModelServer) -> None:
    env = AnswerEnv()
    await env.run_rollout(make_request(mock_server))
    for restored in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        assert isinstance(restored, AnswerEnv)
        rollout = await restored.run_rollout(make_request(mock_server, "rollout-1"))
        assert rollout.termination_reason == "finished"
        await restored.aclose()
    await env.aclose()


async def test_subclass_skipping_init_works(mock_server: MockModelServer) -> None:
    class NoInit(AnswerEnv):
        def __init__(self) -> None:
            self.reward_calls = []

    env = NoInit()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    await env.aclose()


def test_constructor_overrides_only_non_none_values() -> None:
    class Limited(MinimalEnv):
        max_tool_calls = 4
        model_retries = 2
        tool_timeout = 3.0

    env = Limited(max_turns=5, model_timeout=1.5, rollout_timeout=60)
    assert env.max_turns == 5 and env.max_tool_calls == 4
    assert env.model_timeout == 1.5 and env.tool_timeout == 3.0 and env.rollout_timeout == 60
    assert env.model_retries == 2
    assert Limited.max_turns == 1
    assert MinimalEnv(model_retries=0).model_retries == 0


def test_construct_without_max_turns_is_valid() -> None:
    class Unconfigured(MinimalEnv):
        max_turns = None

    assert Unconfigured().max_turns is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_turns": 0}, "max_turns must be a positive integer"),
        ({"max_turns": True}, "max_turns must be a positive integer"),
        ({"max_turns": 1.0}, "max_turns must be a positive integer"),
        ({"max_tool_calls": -1}, "max_tool_calls must be a non-negative integer"),
        ({"max_tool_calls": False}, "max_tool_calls must be a non-negative integer"),
        ({"max_tool_calls": "2"}, "max_tool_calls must be a non-negative integer"),
        ({"model_timeout": 0}, "model_timeout must be a positive number or None"),
        ({"model_timeout": -1.0}, "model_timeout must be a positive number or None"),
        ({"model_timeout": True}, "model_timeout must be a positive number or None"),
        ({"model_timeout": float("inf")}, "model_timeout must be a positive number or None"),
        ({"model_timeout": float("nan")}, "model_timeout must be a positive number or None"),
        ({"model_timeout": 10**400}, "model_timeout must be a positive number or None"),
        ({"tool_timeout": "5"}, "tool_timeout must be a positive number or None"),
        ({"tool_timeout": 0.0}, "tool_timeout must be a positive number or None"),
        ({"rollout_timeout": -3}, "rollout_timeout must be a positive number or None"),
        ({"rollout_timeout": False}, "rollout_timeout must be a positive number or None"),
        ({"model_retries": -1}, "model_retries must be a non-negative integer"),
        ({"model_retries": True}, "model_retries must be a non-negative integer"),
        ({"model_retries": 1.0}, "model_retries must be a non-negative integer"),
    ],
)
def test_limit_validation_messages(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        MinimalEnv(**kwargs)


def test_validation_order_limits_before_timeouts() -> None:
    with pytest.raises(ValueError, match="max_tool_calls"):
        MinimalEnv(max_tool_calls=-1, model_timeout=-1, model_retries=-1)
    with pytest.raises(ValueError, match="model_timeout"):
        MinimalEnv(model_timeout=-1, model_retries=-1)


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        ("max_turns", 0, "max_turns must be a positive integer"),
        ("tool_timeout", -1, "tool_timeout must be a positive number or None"),
        ("model_retries", None, "model_retries must be a non-negative integer"),
    ],
)
async def test_limits_are_revalidated_per_rollout(
    mock_server: MockModelServer, attribute: str, value: Any, message: str
) -> None:
    env = AnswerEnv()
    setattr(env, attribute, value)
    with pytest.raises(ValueError, match=message):
        await env.run_rollout(make_request(mock_server))
    assert mock_server.requests == []


async def test_missing_max_turns_is_rejected_at_rollout(mock_server: MockModelServer) -> None:
    class Unconfigured(AnswerEnv):
        max_turns = None

    with pytest.raises(ValueError, match=r"^Unconfigured must configure max_turns before rollout$"):
        await Unconfigured().run_rollout(make_request(mock_server))


@pytest.mark.parametrize(
    ("payload", "error", "message"),
    [
        (["not", "a", "mapping"], TypeError, "BaseEnv example payload must be a JSON object"),
        ({}, ValueError, "requires a non-empty prompt_messages list"),
        ({"prompt_messages": []}, ValueError, "requires a non-empty prompt_messages list"),
        (
            {"prompt_messages": ({"role": "user", "content": "x"},)},
            ValueError,
            "requires a non-empty prompt_messages list",
        ),
        ({"prompt_messages": ["hi"]}, TypeError, r"prompt_messages\[0\] must be a JSON object"),
        (
            {"prompt_messages": [{"role": "user"}, {"content": "x"}]},
            TypeError,
            r"prompt_messages\[1\].role must be a string",
        ),
    ],
)
async def test_payload_preconditions(
    mock_server: MockModelServer, payload: Any, error: type[Exception], message: str
) -> None:
    request = make_request(mock_server)
    request = dataclasses.replace(
        request, example=dataclasses.replace(request.example, payload=payload)
    )
    with pytest.raises(error, match=message):
        await AnswerEnv().run_rollout(request)
    assert mock_server.requests == []


def test_base_rollout_fields_and_validation() -> None:
    rollout = BaseRollout(
        rollout_id="r1",
        termination_reason="finished",
        messages=[{"role": "user", "content": "hi"}],
        example_args={"answer": "4"},
    )
    assert isinstance(rollout, RolloutAttempt)
    assert rollout.rewards is None and rollout.split == "train"
    assert [f.name for f in dataclasses.fields(BaseRollout)] == [
        "rollout_id",
        "termination_reason",
        "rewards",
        "messages",
        "example_args",
        "split",
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rollout.rewards = {"x": 1.0}  # type: ignore[misc]
    with pytest.raises(TypeError):
        BaseRollout("r1", "finished", None, [], {})  # type: ignore[misc]
    with pytest.raises(ValueError, match="rewards must contain"):
        BaseRollout(
            rollout_id="r", termination_reason="finished", rewards={}, messages=[], example_args={}
        )
    assert pickle.loads(pickle.dumps(rollout)) == rollout


async def test_group_hook_can_be_awaited_on_hand_made_rollouts() -> None:
    class Ranked(MinimalEnv):
        reward_keys = ("rank",)

        async def compute_group_rewards(
            self, rollouts: Sequence[BaseRollout]
        ) -> Mapping[str, RewardMap] | None:
            ordered = sorted(rollouts, key=lambda r: len(r.messages[-1]["content"]))
            return {r.rollout_id: {"rank": float(i)} for i, r in enumerate(ordered)}

    rollouts = [
        BaseRollout(
            rollout_id=f"r{i}",
            termination_reason="finished",
            messages=[{"role": "assistant", "content": "x" * (3 - i)}],
            example_args={"answer": "4"},
            split="eval",
        )
        for i in range(3)
    ]
    assert await Ranked().compute_group_rewards(rollouts) == {
        "r2": {"rank": 0.0},
        "r1": {"rank": 1.0},
        "r0": {"rank": 2.0},
    }
