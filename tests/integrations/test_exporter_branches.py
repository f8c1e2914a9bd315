"""The verl, SkyRL and Atropos exporters emit every branch of a rollout, each with the
rollout's reward (and, for Atropos, its advantage counted once per rollout)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmax.integrations.atropos import IGNORED, scored_data_group
from benchmax.integrations.skyrl import generator_output
from benchmax.integrations.verl import agent_loop_output, agent_loop_outputs
from benchmax.training import group_advantages
from benchmax.trajectory import ModelCall, Trajectory


def call(prompt: tuple[int, ...], completion: tuple[int, ...]) -> ModelCall:
    return ModelCall(
        finish_reason="stop",
        prompt_token_ids=prompt,
        completion_token_ids=completion,
        completion_logprobs=tuple(-0.5 for _ in completion),
    )


def re_rendered(rollout_id: str, reward: float) -> Trajectory:
    """Two branches: the second call's prompt dropped the first reply's token 11
    (a template that strips reasoning), and a third call continues the second."""
    return Trajectory(
        rollout_id=rollout_id,
        example_id="ex",
        termination_reason="finished",
        rewards={"correct": reward},
        messages=({"role": "user", "content": "u"},),
        model_calls=(
            call((1, 2), (10, 11)),
            call((1, 2, 10, 20), (12,)),
            call((1, 2, 10, 20, 12, 21), (13, 14)),
        ),
    )


def single(rollout_id: str, reward: float, group_index: int = 1) -> Trajectory:
    return Trajectory(
        rollout_id=rollout_id,
        example_id="ex",
        group_index=group_index,
        termination_reason="finished",
        rewards={"correct": reward},
        model_calls=(call((1, 2), (30,)),),
    )


def sampled(masks: list[list[int]], ids: list[list[int]]) -> list[int]:
    return [t for m, i in zip(masks, ids, strict=True) for t, on in zip(i, m, strict=True) if on]


def test_verl_emits_each_branch_with_the_rollout_reward() -> None:
    outputs = agent_loop_outputs(re_rendered("r", 1.0))
    assert [o["prompt_ids"] for o in outputs] == [[1, 2], [1, 2, 10, 20]]
    assert [o["response_ids"] for o in outputs] == [[10, 11], [12, 21, 13, 14]]
    assert [o["response_mask"] for o in outputs] == [[1, 1], [1, 0, 1, 1]]
    assert {o["reward_score"] for o in outputs} == {1.0}
    extra = [o["extra_fields"] for o in outputs]
    assert [(e["branch"], e["branches"], e["branch_began"]) for e in extra] == [  # type: ignore[index]
        (0, 2, "first"),
        (1, 2, "history_rewritten"),
    ]


def test_verl_single_record_refuses_to_drop_a_branch() -> None:
    with pytest.raises(ValueError, match=r"rollout .r. has 2 branches.*agent_loop_outputs"):
        agent_loop_output(re_rendered("r", 1.0))
    (only,) = agent_loop_outputs(single("s", 0.0))
    assert agent_loop_output(single("s", 0.0)) == only


def test_skyrl_rows_per_branch_with_last_step_marks() -> None:
    output = generator_output([re_rendered("a", 1.0), single("b", 0.0)])
    assert output["rewards"] == [1.0, 1.0, 0.0]
    assert output["is_last_step"] == [False, True, True]
    ids = output["trajectory_ids"]
    assert isinstance(ids, list) and ids[0] == ids[1] != ids[2]
    masks, responses = output["loss_masks"], output["response_ids"]
    assert sampled(masks, responses) == [10, 11, 12, 13, 14, 30]  # type: ignore[arg-type]
    metrics = output["env_metrics"]
    assert [m["branch_began"] for m in metrics] == ["first", "history_rewritten", "first"]  # type: ignore[union-attr]
    # one branch per rollout: the output is as before (no step marks)
    assert generator_output([single("b", 0.0)])["is_last_step"] is None


def test_atropos_items_per_branch_with_per_rollout_advantages() -> None:
    group = [re_rendered("a", 1.0), single("b", 0.0), single("c", 0.5)]
    output = scored_data_group(group)
    assert output["scores"] == [1.0, 1.0, 0.0, 0.5]
    tokens, masks = output["tokens"], output["masks"]
    trained = [t for item in masks for t in item if t != IGNORED]  # type: ignore[union-attr]
    assert trained == [10, 11, 12, 13, 14, 30, 30]
    expected = group_advantages([1.0, 0.0, 0.5], "grpo")
    advantages = output["advantages"]
    assert isinstance(advantages, list) and isinstance(tokens, list)
    per_item = [expected[0], expected[0], expected[1], expected[2]]
    for item, tokens_of, value in zip(advantages, tokens, per_item, strict=True):
        assert item == [value] * len(tokens_of)
    assert scored_data_group([single("b", 0.0), single("c", 1.0)])["advantages"] is None


def test_atropos_non_trainable_rollout_gets_no_advantage() -> None:
    failed = dataclasses.replace(re_rendered("a", 0.0), termination_reason="model_error")
    output = scored_data_group([failed, single("b", 1.0), single("c", 0.0)])
    advantages = output["advantages"]
    assert isinstance(advantages, list)
    assert advantages[0] == [0.0] * 4 and advantages[1] == [0.0] * 8
    assert output["overrides"][:2] == [{"set_advantage_to_zero": True}] * 2  # type: ignore[index]
