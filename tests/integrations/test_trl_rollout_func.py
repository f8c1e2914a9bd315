"""RolloutFunc without TRL or torch: the dict it hands GRPOTrainer, against the mock server
in token mode (vLLM-shaped replies) running the calculator example's scripted policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from examples.calculator.env import CalculatorEnv
from examples.calculator.policy import solve

from benchmax.envs import Example
from benchmax.integrations.trl import (
    RolloutFunc,
    benchmax_reward,
    dataset_rows,
    load_examples,
)
from benchmax.testing import Fault, MockModelServer, RecordedRequest
from benchmax.trajectory import Trajectory

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
TRAINER = SimpleNamespace(
    args=SimpleNamespace(temperature=0.7, top_p=0.9),
    processing_class=SimpleNamespace(eos_token_id=2, pad_token_id=0),
)
KEYS = {
    "prompt_ids",
    "completion_ids",
    "logprobs",
    "env_mask",
    "benchmax_reward",
    "benchmax_rewards",
    "termination_reason",
    "rollout_id",
    "trainable",
    "token_prefix_breaks",
}


def _examples() -> list[Example[Any]]:
    return load_examples(CalculatorEnv(), "eval", CALCULATOR, max_examples=2)


def _session_url(server: MockModelServer) -> str:
    return server.session_url("ROLLOUT").replace("ROLLOUT", "{rollout_id}")


async def test_rollout_func_returns_stitched_tokens_masks_and_rewards() -> None:
    examples = _examples()
    prompts = [row["prompt"] for row in dataset_rows(examples) for _ in range(3)]
    trajectories: list[Trajectory] = []
    async with MockModelServer(solve, tokens=True) as server:
        server.inject(Fault.status(500), session="trl-0-0-1")  # the 2nd rollout, 1st group
        rollout = RolloutFunc(
            CalculatorEnv(),
            examples,
            base_url=_session_url(server),
            model="m",
            seed=3,
            on_group=trajectories.extend,
        )
        try:
            output = await asyncio.to_thread(rollout, prompts, TRAINER)
        finally:
            await asyncio.to_thread(rollout.close)
        bodies = [request.body for request in server.requests]

    assert set(output) == KEYS
    assert all(len(values) == 6 for values in output.values())
    by_id = {t.rollout_id: t for t in trajectories}
    assert output["rollout_id"] == [f"trl-0-{g}-{i}" for g in (0, 1) for i in range(3)]
    for row, rollout_id in enumerate(output["rollout_id"]):
        trajectory = by_id[rollout_id]
        assert trajectory.example_id == examples[row // 3].id
        ids, mask = output["completion_ids"][row], output["env_mask"][row]
        assert len(ids) == len(mask) == len(output["logprobs"][row])
        if rollout_id == "trl-0-0-1":
            # model_error on the first call: a masked placeholder, no reward.
            assert trajectory.termination_reason == "model_error"
            assert output["trainable"][row] is False
            assert output["benchmax_reward"][row] is None
            assert ids == [2] and mask == [0]
            continue
        calls = trajectory.model_calls
        assert output["trainable"][row] is True
        assert output["prompt_ids"][row] == list(calls[0].prompt_token_ids or ())
        sampled = [t for call in calls for t in call.completion_token_ids or ()]
        assert [t for t, m in zip(ids, mask, strict=True) if m] == sampled
        tool_turns = sum(1 for m in trajectory.messages or () if m["role"] == "tool")
        assert (0 in mask) == (tool_turns > 0)
        assert output["benchmax_reward"][row] == sum(trajectory.rewards.values())
        assert output["benchmax_rewards"][row] == dict(trajectory.rewards)
    # Every request asked for tokens, carried the trainer's sampling settings and its
    # rollout's own seed (the same seed on every turn of a rollout).
    assert all(b["logprobs"] is True and b["return_token_ids"] is True for b in bodies)
    assert all(b["temperature"] == 0.7 and b["top_p"] == 0.9 for b in bodies)
    assert len({b["seed"] for b in bodies}) == 6
    # The companion reward function hands TRL exactly that column.
    assert benchmax_reward(prompts, [None] * 6, **output) == output["benchmax_reward"]


def _add_then_fail_rollout_0(body: dict[str, Any], request: RecordedRequest) -> Any:
    """Every rollout calls ``add`` first; rollout ``trl-0-0-0``'s second call fails."""
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}
    if request.session == "trl-0-0-0":
        return Fault.status(500)
    return "<answer>3</answer>"


async def test_a_rollout_failing_after_sampled_turns_is_masked_whole() -> None:
    examples = _examples()[:1]
    prompts = [dataset_rows(examples)[0]["prompt"]] * 2
    async with MockModelServer(_add_then_fail_rollout_0, tokens=True) as server:
        with RolloutFunc(
            CalculatorEnv(), examples, base_url=_session_url(server), model="m"
        ) as rollout:
            output = await asyncio.to_thread(rollout, prompts, TRAINER)
    assert output["termination_reason"] == ["model_error", "finished"]
    assert output["benchmax_reward"] == [None, 1.0]  # correct 0 + used_tools 1
    # The failed rollout's first, sampled call is there, and masked.
    assert len(output["completion_ids"][0]) > 1 and not any(output["env_mask"][0])
    assert 0 in output["env_mask"][1] and 1 in output["env_mask"][1]


async def test_prompts_map_to_examples_by_messages_or_id() -> None:
    examples = _examples()
    async with MockModelServer(solve, tokens=True) as server:
        with RolloutFunc(CalculatorEnv(), examples, base_url=server.base_url, model="m") as rollout:
            by_id = await asyncio.to_thread(rollout, [examples[1].id] * 2, TRAINER)
            with pytest.raises(ValueError, match="matches no example"):
                await asyncio.to_thread(rollout, [[{"role": "user", "content": "?"}]], TRAINER)
    assert by_id["prompt_ids"][0] == by_id["prompt_ids"][1]
    assert by_id["rollout_id"] == ["trl-0-0-0", "trl-0-0-1"]


def test_examples_sharing_a_prompt_are_refused() -> None:
    prompt = [{"role": "user", "content": "same"}]
    examples = [
        Example(id="a", payload={"prompt_messages": prompt, "answer": 1}),
        Example(id="b", payload={"prompt_messages": prompt, "answer": 2}),
    ]
    with pytest.raises(ValueError, match="'a' and 'b' have the same prompt_messages"):
        RolloutFunc(CalculatorEnv(), examples, base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(KeyError, match="benchmax_reward"):
        benchmax_reward([], [])
