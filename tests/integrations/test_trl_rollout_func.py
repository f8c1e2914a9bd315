"""RolloutFunc without TRL or torch: the dict it hands GRPOTrainer, against the mock server
in token mode (vLLM-shaped replies) running the calculator example's scripted policy."""

from __future__ import annotations

import asyncio
import re
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
from benchmax.training import rollout_seed
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
    "benchmax_branch_rows",
    "benchmax_coverage",
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


def _answer_correctly(body: dict[str, Any], request: RecordedRequest) -> str:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    a, b, c = (int(n) for n in re.findall(r"-?\d+", question.split("Compute", 1)[1])[:3])
    return f"<answer>{(a + b) * c}</answer>"


def _twins() -> list[Example[Any]]:
    """Two examples with the same prompt and different expected answers."""
    (example,) = _examples()[:1]
    wrong = {**example.payload, "answer": example.payload["answer"] + 1}
    return [example, Example(id="twin", payload=wrong)]


async def test_examples_sharing_a_prompt_are_found_by_their_id() -> None:
    examples = _twins()
    rows = dataset_rows(examples)
    assert rows[0]["prompt"][0]["benchmax_example_id"] == examples[0].id
    assert rows[1]["prompt"][0]["benchmax_example_id"] == "twin"
    prompts = [row["prompt"] for row in rows for _ in range(2)]
    async with MockModelServer(_answer_correctly, tokens=True) as server:
        with RolloutFunc(CalculatorEnv(), examples, base_url=server.base_url, model="m") as rollout:
            output = await asyncio.to_thread(rollout, prompts, TRAINER)
            # The bare prompt (no id) is ambiguous: refused, naming both examples.
            bare = examples[0].payload["prompt_messages"]
            with pytest.raises(ValueError, match=r"shared by examples .*'twin'"):
                await asyncio.to_thread(rollout, [bare], TRAINER)
            with pytest.raises(ValueError, match="'nope', which is not among the examples"):
                tagged = [{**bare[0], "benchmax_example_id": "nope"}, *bare[1:]]
                await asyncio.to_thread(rollout, [tagged], TRAINER)
    # The first example is answered right, its twin (expecting answer + 1) wrong.
    assert [r["correct"] for r in output["benchmax_rewards"]] == [1.0, 1.0, 0.0, 0.0]
    assert output["rollout_id"] == ["trl-0-0-0", "trl-0-0-1", "trl-0-1-0", "trl-0-1-1"]


async def test_prompts_round_tripped_through_arrow_still_match() -> None:
    datasets = pytest.importorskip("datasets")
    examples = _twins()
    rows = dataset_rows(examples)
    rows[0]["prompt"][1]["name"] = "alice"  # Arrow adds name: None to every other message
    arrow = list(datasets.Dataset.from_list(rows))
    assert arrow[1]["prompt"][1]["name"] is None
    assert arrow[1]["prompt"][1]["benchmax_example_id"] is None
    untagged = [
        [{k: v for k, v in m.items() if k != "benchmax_example_id"} for m in row["prompt"]]
        for row in arrow
    ]
    async with MockModelServer(_answer_correctly, tokens=True) as server:
        with RolloutFunc(
            CalculatorEnv(), examples[1:], base_url=server.base_url, model="m"
        ) as rollout:
            # Tagged: by id; untagged (name: None added): by its messages.
            by_id = await asyncio.to_thread(rollout, [arrow[1]["prompt"]], TRAINER)
            by_text = await asyncio.to_thread(rollout, [untagged[1]], TRAINER)
    assert (
        by_id["benchmax_rewards"]
        == by_text["benchmax_rewards"]
        == [{"correct": 0.0, "used_tools": 0.0}]
    )


def _process(index: int, generations: int = 4) -> SimpleNamespace:
    """A trainer as TRL's: its group size, its model's mode and its process index."""
    return SimpleNamespace(
        args=TRAINER.args,
        processing_class=TRAINER.processing_class,
        num_generations=generations,
        num_generations_eval=None,
        model=SimpleNamespace(training=True),
        accelerator=SimpleNamespace(process_index=index),
    )


async def test_a_group_split_across_processes_gets_distinct_ids_and_seeds() -> None:
    examples = _examples()
    prompt = dataset_rows(examples)[0]["prompt"]
    async with MockModelServer(_answer_correctly, tokens=True) as server:
        halves = []
        for process in (0, 1):  # TRL gave each process 2 of the group's 4 rows
            with RolloutFunc(
                CalculatorEnv(), examples, base_url=server.base_url, model="m", seed=1
            ) as rollout:
                halves.append(await asyncio.to_thread(rollout, [prompt] * 2, _process(process)))
        seeds = [request.body["seed"] for request in server.requests]
    assert halves[0]["rollout_id"] == ["trl-0-0-0", "trl-0-0-1"]
    assert halves[1]["rollout_id"] == ["trl-0-0-2", "trl-0-0-3"]
    assert seeds == [rollout_seed(1, examples[0].id, row) for row in range(4)]


async def test_rows_of_a_batch_form_trl_groups_even_for_one_example() -> None:
    examples = _examples()
    prompt = dataset_rows(examples)[0]["prompt"]
    async with MockModelServer(_answer_correctly, tokens=True) as server:
        with RolloutFunc(CalculatorEnv(), examples, base_url=server.base_url, model="m") as rollout:
            # The same example twice in one batch of groups of 2: two groups.
            output = await asyncio.to_thread(rollout, [prompt] * 4, _process(0, generations=2))
    assert output["rollout_id"] == ["trl-0-0-0", "trl-0-0-1", "trl-0-1-0", "trl-0-1-1"]


async def test_a_resumed_function_continues_the_ids_and_seeds() -> None:
    examples = _examples()
    prompts = [dataset_rows(examples)[0]["prompt"]] * 2

    async def ids_and_seeds(calls_done: int, calls: int) -> tuple[list[Any], list[Any], int]:
        async with MockModelServer(_answer_correctly, tokens=True) as server:
            with RolloutFunc(
                CalculatorEnv(),
                examples,
                base_url=server.base_url,
                model="m",
                seed=9,
                calls_done=calls_done,
            ) as rollout:
                for _ in range(calls):
                    output = await asyncio.to_thread(rollout, prompts, _process(0, 2))
                done = rollout.calls_done
            return output["rollout_id"], [r.body["seed"] for r in server.requests[-2:]], done

    uninterrupted = await ids_and_seeds(0, 3)
    resumed = await ids_and_seeds(2, 1)
    assert uninterrupted == resumed
    assert resumed[0] == ["trl-2-0-0", "trl-2-0-1"] and resumed[2] == 3
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="calls_done must be a non-negative integer"):
            RolloutFunc(
                CalculatorEnv(),
                examples,
                base_url="http://127.0.0.1:9/v1",
                model="m",
                calls_done=bad,  # type: ignore[arg-type]
            )


def test_bad_examples_and_the_reward_without_rollouts_are_refused() -> None:
    prompt = [{"role": "user", "content": "same"}]
    examples = [
        Example(id="a", payload={"prompt_messages": prompt, "answer": 1}),
        Example(id="a", payload={"prompt_messages": prompt, "answer": 2}),
    ]
    with pytest.raises(ValueError, match="two different examples have the id 'a'"):
        RolloutFunc(CalculatorEnv(), examples, base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ValueError, match="non-empty list of messages"):
        dataset_rows([Example(id="e", payload={"prompt_messages": []})])
    with pytest.raises(KeyError, match="benchmax_reward"):
        benchmax_reward([], [])


async def test_budget_ends_are_counted_not_logged_per_rollout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    examples = _examples()
    prompts = [row["prompt"] for row in dataset_rows(examples) for _ in range(4)]
    async with MockModelServer(solve, tokens=True) as server:
        rollout = RolloutFunc(
            CalculatorEnv(max_turns=1), examples, base_url=_session_url(server), model="m"
        )
        try:
            with caplog.at_level("INFO"):
                output = await asyncio.to_thread(rollout, prompts, TRAINER)
                again = await asyncio.to_thread(rollout, prompts, TRAINER)
        finally:
            await asyncio.to_thread(rollout.close)
    ends = output["termination_reason"] + again["termination_reason"]
    budget = ends.count("max_turns_exceeded")  # a first turn that calls a tool
    assert budget >= 8 and set(ends) <= {"max_turns_exceeded", "finished"}
    assert rollout.budget_ends == budget
    assert not [r for r in caplog.records if "benchmax.rollout.terminated" in r.getMessage()]
