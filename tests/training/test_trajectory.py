"""The rollout record: validation, the results line, what BaseEnv reports, annotate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmax import _vocabulary
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    Dataset,
    DatasetSplit,
    Example,
    JsonRow,
    shared_types,
)
from benchmax.results import read_results
from benchmax.runner import RunConfig, run_environment
from benchmax.testing import MockModelServer, scripted
from benchmax.trajectory import ModelCall, ToolCallTiming, Trajectory, annotate

PINNED = Path(__file__).parents[1] / "runner" / "data" / "results-v1.jsonl"


class LookupEnv(BaseEnv):
    """One tool (``lookup``), two turns; annotates from the tool and from compute_reward."""

    reward_keys = ("correct",)
    max_turns = 3

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        payload = {"prompt_messages": [{"role": "user", "content": "find x"}], "answer": "42"}
        return Dataset([Example(id="ex-0", payload=payload)])

    async def list_tools(self) -> list[Any]:
        schema = {"type": "object", "properties": {"key": {"type": "string"}}}
        return [{"type": "function", "function": {"name": "lookup", "parameters": schema}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        annotate("looked_up", tool_args)
        return "42"

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        content = rollout.messages[-1]["content"]
        annotate("judge", {"explanation": f"said {content}", "score": 1})
        return {"correct": float(content == rollout.example_args["answer"])}


TOOL_SCRIPT = scripted(
    [
        {"content": None, "tool_calls": [{"name": "lookup", "arguments": {"key": "x"}}]},
        "42",
    ]
)


def test_the_vocabulary_is_reexported_by_shared_types() -> None:
    assert shared_types.FINISHED is _vocabulary.FINISHED
    assert shared_types.CONTEXT_EXCEEDED == "context_exceeded"
    assert shared_types.TerminationReason is _vocabulary.TerminationReason


def test_a_model_call_stores_tuples_and_checks_alignment() -> None:
    call = ModelCall(
        prompt_token_ids=[1, 2],  # type: ignore[arg-type]
        completion_token_ids=[3],  # type: ignore[arg-type]
        completion_logprobs=[-0.5],  # type: ignore[arg-type]
    )
    assert call.prompt_token_ids == (1, 2) and call.completion_logprobs == (-0.5,)
    with pytest.raises(ValueError, match="aligned"):
        ModelCall(completion_token_ids=(1, 2), completion_logprobs=(-0.1,))
    with pytest.raises(ValueError, match="aligned"):
        ModelCall(completion_logprobs=(-0.1,))
    with pytest.raises(ValueError, match=r"integers in \[0, 2\*\*63\), got -2 at index 1"):
        ModelCall(prompt_token_ids=(1, -2))
    with pytest.raises(ValueError, match=r"integers in \[0, 2\*\*63\), got True"):
        ModelCall(prompt_token_ids=(1, True))
    with pytest.raises(ValueError, match="seconds"):
        ModelCall(seconds=float("nan"))
    with pytest.raises(ValueError, match="unknown key"):
        ModelCall(usage={"tokens": 3})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValueError, match="message_index"):
        ModelCall(message_index=-1)


def test_a_trajectory_rejects_malformed_fields() -> None:
    base: dict[str, Any] = {
        "rollout_id": "r",
        "example_id": "e",
        "termination_reason": "finished",
        "rewards": {"a": 1.0},
    }
    Trajectory(**base)
    with pytest.raises(ValueError, match="termination_reason"):
        Trajectory(**{**base, "termination_reason": ""})
    with pytest.raises(ValueError, match="reward 'a'"):
        Trajectory(**{**base, "rewards": {"a": "1"}})
    with pytest.raises(TypeError, match="model_calls"):
        Trajectory(**base, model_calls=({"seconds": 1.0},))
    with pytest.raises(TypeError, match="annotations"):
        Trajectory(**base, annotations={1: "x"})


def test_a_trajectory_round_trips_through_its_results_line() -> None:
    trajectory = Trajectory(
        rollout_id="run.e0.a1-abcd.r1",
        example_id="ex-0",
        termination_reason="output_exceeded",
        rewards={"correct": 0.0},
        run_id="run",
        split="eval",
        example_index=0,
        group_index=1,
        messages=({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}),
        model_calls=(
            ModelCall(
                finish_reason="length",
                usage={"prompt_tokens": 2, "completion_tokens": 1},
                seconds=0.25,
                message_index=1,
                prompt_token_ids=(5, 6),
                completion_token_ids=(7,),
                completion_logprobs=(-0.125,),
            ),
        ),
        tool_calls=(ToolCallTiming(name="t", seconds=0.5, message_index=2),),
        timings={"group_seconds": 1.0},
        usage={"prompt_tokens": 2, "completion_tokens": 1},
        annotations={"note": [1, "two"]},
    )
    line = json.loads(json.dumps(trajectory.to_json()))
    assert line["model_calls"][0]["completion_token_ids"] == [7]
    assert Trajectory.from_json(line) == trajectory
    assert trajectory.trainable  # output_exceeded is trainable
    plain = Trajectory.from_json({**line, "model_calls": [{"seconds": 0.0}]})
    assert "prompt_token_ids" not in plain.to_json()["model_calls"][0]


def test_every_pinned_v1_line_reads_as_a_trajectory_without_calls() -> None:
    raw_lines = PINNED.read_bytes().splitlines()[1:-1]  # the last line is torn on purpose
    lines = [json.loads(raw) for raw in raw_lines if raw.strip()]
    trajectories = [Trajectory.from_json(line) for line in lines]
    assert trajectories and all(t.model_calls == () and t.annotations == {} for t in trajectories)
    assert trajectories[0].messages is not None
    assert trajectories[0].messages[0]["content"] == "zero \ud800"


def test_trainable_follows_the_documented_table() -> None:
    def reason(name: str) -> Trajectory:
        return Trajectory(rollout_id="r", example_id="e", termination_reason=name, rewards={})

    trainable = {"finished", "max_turns_exceeded", "tool_budget_exceeded", "output_exceeded"}
    for name in [*_vocabulary.TerminationReason.__args__, "my_own_failure"]:
        assert reason(name).trainable is (name in trainable), name


def test_annotate_outside_a_recorded_rollout_does_nothing() -> None:
    annotate("key", {"anything": object()})  # not checked: nothing records it
    with pytest.raises(ValueError, match="non-empty"):
        annotate("", 1)


async def test_a_run_records_model_calls_tool_calls_and_annotations(tmp_path: Path) -> None:
    async with MockModelServer(TOOL_SCRIPT, record=False) as server:
        TOOL_SCRIPT.reset()
        config = RunConfig(
            model="m", base_url=server.base_url, group_size=1, output=tmp_path / "r.jsonl"
        )
        await run_environment(LookupEnv(), config)
    line = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[1])
    trajectory = Trajectory.from_json(line)
    assert trajectory.termination_reason == "finished" and trajectory.rewards == {"correct": 1.0}
    assert trajectory.messages is not None
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    first, second = trajectory.model_calls
    assert (first.finish_reason, first.message_index) == ("tool_calls", 1)
    assert (second.finish_reason, second.message_index) == ("stop", 3)
    assert first.usage is not None and first.usage["prompt_tokens"] >= 1
    assert first.prompt_token_ids is None and not trajectory.has_tokens
    assert trajectory.timings["model_seconds"] == pytest.approx(
        first.seconds + second.seconds, abs=2e-6
    )
    (tool,) = trajectory.tool_calls
    assert (tool.name, tool.message_index) == ("lookup", 2)
    assert trajectory.annotations == {
        "looked_up": {"key": "x"},
        "judge": {"explanation": "said 42", "score": 1},
    }
    assert trajectory.token_prefix_breaks == 0 and trajectory.trainable


async def test_a_failed_call_is_recorded_without_a_message(tmp_path: Path) -> None:
    from benchmax.testing import Fault

    policy = scripted([Fault.status(400, message="bad request")])
    async with MockModelServer(policy, record=False) as server:
        config = RunConfig(
            model="m", base_url=server.base_url, group_size=1, output=tmp_path / "r.jsonl"
        )
        await run_environment(LookupEnv(), config)
    (trajectory,) = read_results(tmp_path / "r.jsonl").rollouts
    record = Trajectory.from_json(trajectory) if isinstance(trajectory, dict) else trajectory
    assert record.termination_reason == "model_error" and not record.trainable
    (call,) = record.model_calls
    assert call.message_index is None and call.finish_reason is None and call.seconds > 0


async def test_a_value_json_cannot_hold_fails_the_annotating_hook(tmp_path: Path) -> None:
    class BadNote(LookupEnv):
        async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
            annotate("bad", {1, 2})
            return {"correct": 1.0}

    async with MockModelServer(TOOL_SCRIPT, record=False) as server:
        TOOL_SCRIPT.reset()
        config = RunConfig(
            model="m", base_url=server.base_url, group_size=1, output=tmp_path / "r.jsonl"
        )
        await run_environment(BadNote(), config)
    line = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[1])
    assert line["termination_reason"] == "reward_error"
    assert "annotation 'bad' is not JSON data" in json.dumps(line["logs"])


def test_a_continuing_call_stores_only_the_prompt_ids_it_adds() -> None:
    first = ModelCall(
        prompt_token_ids=(1, 2), completion_token_ids=(3,), completion_logprobs=(-0.5,)
    )
    failed = ModelCall(seconds=0.5)  # no tokens: skipped when continuing
    second = ModelCall(
        prompt_token_ids=(1, 2, 3, 9), completion_token_ids=(4,), completion_logprobs=(-0.25,)
    )
    broken = ModelCall(
        prompt_token_ids=(1, 2, 4), completion_token_ids=(5,), completion_logprobs=(-1.0,)
    )
    trajectory = Trajectory(
        rollout_id="r",
        example_id="e",
        termination_reason="finished",
        rewards={},
        model_calls=(first, failed, second, broken),
    )
    calls = trajectory.to_json()["model_calls"]
    assert calls[0]["prompt_token_ids"] == [1, 2]
    assert "prompt_token_ids" not in calls[2] and calls[2]["prompt_token_ids_added"] == [9]
    assert calls[3]["prompt_token_ids"] == [1, 2, 4]  # a break stores the whole prompt
    assert Trajectory.from_json(json.loads(json.dumps(trajectory.to_json()))) == trajectory
    orphan = {"seconds": 0.0, "prompt_token_ids_added": [1]}
    with pytest.raises(ValueError, match="without a previous call"):
        Trajectory.from_json({**trajectory.to_json(), "model_calls": [orphan]})


def test_a_trajectory_pickles_for_worker_processes() -> None:
    import pickle
    from types import MappingProxyType

    call = ModelCall(
        finish_reason="stop",
        seconds=0.5,
        prompt_token_ids=(1, 2),
        completion_token_ids=(3,),
        completion_logprobs=(-0.25,),
    )
    for attached in ({}, MappingProxyType({"judge": {"score": 1}})):
        trajectory = Trajectory(
            rollout_id="r0",
            example_id="e0",
            termination_reason="finished",
            rewards={"correct": 1.0},
            model_calls=(call,),
            annotations=attached,
        )
        again = pickle.loads(pickle.dumps(trajectory))
        assert again == trajectory and again.model_calls == (call,)
        assert again.to_json() == trajectory.to_json()
    plain = Trajectory(rollout_id="r", example_id="e", termination_reason="x", rewards={})
    assert pickle.loads(pickle.dumps(plain)) == plain  # the read-only empty defaults
