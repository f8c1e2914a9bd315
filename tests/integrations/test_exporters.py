"""The verl, SkyRL and Atropos exporters map a trajectory field for field.

The expected field names are those of verl 0.9 ``AgentLoopOutput``, skyrl 0.4
``GeneratorOutput`` and atroposlib 0.4 ``ScoredDataGroup`` (read from their source).
"""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from benchmax.integrations.atropos import IGNORED, scored_data_group
from benchmax.integrations.skyrl import generator_output
from benchmax.integrations.verl import agent_loop_output
from benchmax.trajectory import ModelCall, Trajectory

VERL_FIELDS = {
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "reward_score",
    "num_turns",
    "metrics",
    "extra_fields",
}
VERL_OPTIONAL = {"routed_experts", "multi_modal_data", "mm_processor_kwargs", "mm_processor_output"}
SKYRL_FIELDS = {
    "prompt_token_ids",
    "response_ids",
    "rewards",
    "loss_masks",
    "stop_reasons",
    "rollout_metrics",
    "rollout_logprobs",
    "trajectory_ids",
    "trajectory_generation_times",
    "trajectory_time_splits",
    "rollout_expert_indices",
    "rollout_sample_support",
    "is_last_step",
    "env_metrics",
    "pixel_values",
    "image_grid_thw",
}
ATROPOS_FIELDS = {
    "tokens",
    "masks",
    "scores",
    "advantages",
    "ref_logprobs",
    "messages",
    "generation_params",
    "inference_logprobs",
    "group_overrides",
    "overrides",
    "images",
    "distill_token_ids",
    "distill_logprobs",
}

PROMPT = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
TOOL_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    ],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "c1", "content": "3"}
ANSWER = {"role": "assistant", "content": "<answer>3</answer>"}


def two_turns(rollout_id: str = "r0", group_index: int = 0) -> Trajectory:
    """Prompt (1,2,3); the model samples (10,11), the tool adds (20,21), then (12,13)."""
    return Trajectory(
        rollout_id=rollout_id,
        example_id="ex",
        termination_reason="finished",
        rewards={"correct": 1.0, "used_tools": 1.0},
        group_index=group_index,
        messages=(*PROMPT, TOOL_CALL, TOOL_RESULT, ANSWER),
        model_calls=(
            ModelCall(
                finish_reason="tool_calls",
                message_index=2,
                seconds=0.5,
                prompt_token_ids=(1, 2, 3),
                completion_token_ids=(10, 11),
                completion_logprobs=(-0.1, -0.2),
            ),
            ModelCall(
                finish_reason="stop",
                message_index=4,
                seconds=0.25,
                prompt_token_ids=(1, 2, 3, 10, 11, 20, 21),
                completion_token_ids=(12, 13),
                completion_logprobs=(-0.3, -0.4),
            ),
        ),
        timings={"model_seconds": 0.75, "tool_seconds": 0.125, "reward_seconds": 0.0625},
    )


def failed_after_one_call() -> Trajectory:
    """A model_error on the second call: tokens of the first call, not trainable."""
    return Trajectory(
        rollout_id="r1",
        example_id="ex",
        termination_reason="model_error",
        rewards={"correct": 0.0, "used_tools": 0.0},
        group_index=1,
        messages=(*PROMPT, TOOL_CALL, TOOL_RESULT),
        model_calls=(
            ModelCall(
                finish_reason="tool_calls",
                message_index=2,
                prompt_token_ids=(1, 2, 3),
                completion_token_ids=(10, 11),
                completion_logprobs=(-0.1, -0.2),
            ),
            ModelCall(),
        ),
    )


def test_verl_agent_loop_output_maps_every_field() -> None:
    output = agent_loop_output(two_turns())
    assert set(output) == VERL_FIELDS and not set(output) & VERL_OPTIONAL
    assert output["prompt_ids"] == [1, 2, 3]
    assert output["response_ids"] == [10, 11, 20, 21, 12, 13]
    assert output["response_mask"] == [1, 1, 0, 0, 1, 1]
    assert output["response_logprobs"] == [-0.1, -0.2, 0.0, 0.0, -0.3, -0.4]
    assert output["num_turns"] == 4  # assistant, tool, assistant + the prompt's turn
    assert output["metrics"] == {
        "generate_sequences": 0.75,
        "tool_calls": 0.125,
        "compute_score": 0.0625,
        "num_preempted": -1,
    }
    assert output["extra_fields"]["trainable"] is True
    assert output["extra_fields"]["rewards"] == {"correct": 1.0, "used_tools": 1.0}
    assert agent_loop_output(two_turns(), reward_score=0.5)["reward_score"] == 0.5


def test_verl_masks_a_non_trainable_rollout() -> None:
    output = agent_loop_output(failed_after_one_call())
    assert output["response_ids"] == [10, 11]
    assert output["response_mask"] == [0, 0]
    assert output["extra_fields"]["trainable"] is False
    assert output["extra_fields"]["termination_reason"] == "model_error"


def test_skyrl_generator_output_maps_every_field() -> None:
    trajectories = [two_turns(), failed_after_one_call()]
    output = generator_output(trajectories, rewards=[2.0, 0.0])
    assert set(output) == SKYRL_FIELDS
    assert output["prompt_token_ids"] == [[1, 2, 3], [1, 2, 3]]
    assert output["response_ids"] == [[10, 11, 20, 21, 12, 13], [10, 11]]
    assert output["loss_masks"] == [[1, 1, 0, 0, 1, 1], [0, 0]]
    assert output["rollout_logprobs"][0] == [-0.1, -0.2, 0.0, 0.0, -0.3, -0.4]
    assert output["rewards"] == [2.0, 0.0]
    assert output["stop_reasons"] == ["stop", "tool_calls"]
    assert output["trajectory_ids"] == [
        {"instance_id": "ex", "repetition_id": 0},
        {"instance_id": "ex", "repetition_id": 1},
    ]
    assert output["trajectory_time_splits"] == {"llm": [0.75, 0.0], "env": [0.1875, 0.0]}
    assert output["trajectory_generation_times"] == [0.9375, 0.0]
    assert [m["trainable"] for m in output["env_metrics"]] == [True, False]
    # Every per-row list has one entry per response, as SkyRL's validator requires.
    for key in ("loss_masks", "rewards", "rollout_logprobs", "stop_reasons", "trajectory_ids"):
        assert len(output[key]) == len(output["response_ids"])


def test_skyrl_trajectory_ids_are_skyrls_own_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in for skyrl 0.4's skyrl/train/generators/base.py (SkyRL needs torch and a
    # dozen packages): the exporter must build that module's TrajectoryID.
    @dataclasses.dataclass
    class TrajectoryID:
        instance_id: str
        repetition_id: int

        def to_string(self) -> str:
            return f"{self.instance_id}_{self.repetition_id}"

    base = types.ModuleType("skyrl.train.generators.base")
    base.TrajectoryID = TrajectoryID  # type: ignore[attr-defined]
    for name in ("skyrl", "skyrl.train", "skyrl.train.generators"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "skyrl.train.generators.base", base)
    output = generator_output([two_turns(), failed_after_one_call()], rewards=[2.0, 0.0])
    ids = output["trajectory_ids"]
    assert all(type(tid) is TrajectoryID for tid in ids)
    assert [tid.instance_id for tid in ids] == ["ex", "ex"]  # what SkyRL's trainer reads
    assert [tid.to_string() for tid in ids] == ["ex_0", "ex_1"]


def test_atropos_scored_data_group_maps_every_field() -> None:
    output = scored_data_group([two_turns(), failed_after_one_call()], scores=[1.0, 0.0])
    assert set(output) == ATROPOS_FIELDS
    assert output["tokens"][0] == [1, 2, 3, 10, 11, 20, 21, 12, 13]
    assert output["masks"][0] == [IGNORED] * 3 + [10, 11, IGNORED, IGNORED, 12, 13]
    assert output["inference_logprobs"][0] == [1.0] * 3 + [-0.1, -0.2, 1.0, 1.0, -0.3, -0.4]
    assert output["masks"][1] == [IGNORED] * 5
    assert output["overrides"] == [{}, {"set_advantage_to_zero": True}]
    assert output["scores"] == [1.0, 0.0]
    assert output["messages"][0][-1] == ANSWER
    for tokens, masks, logprobs in zip(
        output["tokens"], output["masks"], output["inference_logprobs"], strict=True
    ):
        assert len(tokens) == len(masks) == len(logprobs)


def test_exporters_refuse_a_rollout_without_tokens() -> None:
    bare = Trajectory(
        rollout_id="r9",
        example_id="ex",
        termination_reason="finished",
        rewards={"correct": 1.0},
        messages=(*PROMPT, ANSWER),
        model_calls=(ModelCall(finish_reason="stop", message_index=2),),
    )
    for export in (
        agent_loop_output,
        lambda t: generator_output([t]),
        lambda t: scored_data_group([t]),
    ):
        with pytest.raises(ValueError, match=r"r9.*no token ids"):
            export(bare)
    with pytest.raises(ValueError, match="2 rewards for 1 trajectories"):
        generator_output([two_turns()], rewards=[1.0, 2.0])
