"""Exact tokens in the rollout record: compact lines, rounded logprobs, what a run writes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from tests.envs.base.support import MULTIPLY_TOOL

from benchmax.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit, Example, JsonRow
from benchmax.results import ResultsFileError, read_results
from benchmax.runner import RunConfig, run_environment
from benchmax.testing import MockModelServer, ToyChatTemplate, scripted
from benchmax.training import read_trajectories, to_training_samples
from benchmax.trajectory import LOGPROB_DECIMALS, ModelCall, Trajectory


def _trajectory(*calls: ModelCall) -> Trajectory:
    return Trajectory(
        rollout_id="r",
        example_id="e",
        termination_reason="finished",
        rewards={},
        model_calls=calls,
    )


def _line(trajectory: Trajectory) -> dict[str, Any]:
    return json.loads(json.dumps(trajectory.to_json()))


def test_a_line_rounds_logprobs_and_memory_keeps_them() -> None:
    call = ModelCall(
        prompt_token_ids=(1,),
        completion_token_ids=(2, 3),
        completion_logprobs=(-0.123456789, -9999.0),
    )
    line = _line(_trajectory(call))
    assert line["model_calls"][0]["completion_logprobs"] == [-0.12346, -9999.0]
    assert call.completion_logprobs == (-0.123456789, -9999.0)
    (read,) = Trajectory.from_json(line).model_calls
    assert read.completion_logprobs == (round(-0.123456789, LOGPROB_DECIMALS), -9999.0)


def test_a_thousand_token_completion_adds_at_most_16_kb() -> None:
    rng = random.Random(3)
    ids = tuple(rng.randrange(151_000) for _ in range(1000))  # a Qwen-sized vocabulary
    logprobs = tuple(-rng.expovariate(1.5) for _ in range(1000))  # as sent: 17 digits
    bare = _line(_trajectory(ModelCall()))
    full = _line(_trajectory(ModelCall(completion_token_ids=ids, completion_logprobs=logprobs)))
    added = len(json.dumps(full, separators=(",", ":"))) - len(
        json.dumps(bare, separators=(",", ":"))
    )
    assert added <= 16_000


class TwoTurnEnv(BaseEnv):
    reward_keys = ("done",)
    max_turns = 3
    record_tokens = True

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        payload = {"prompt_messages": [{"role": "user", "content": "6*7?"}]}
        return Dataset([Example(id="ex-0", payload=payload)])

    async def list_tools(self) -> list[Any]:
        return [MULTIPLY_TOOL]

    async def run_tool(self, rollout_id: str, tool_name: str, **arguments: Any) -> Any:
        return arguments["left"] * arguments["right"]

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"done": 1.0}


async def test_a_run_writes_and_reads_back_the_exact_tokens(tmp_path: Path) -> None:
    policy = scripted(
        [{"tool_calls": [{"name": "multiply", "arguments": {"left": 6, "right": 7}}]}, "42"],
    )
    output = tmp_path / "run.jsonl"
    async with MockModelServer(policy, tokens=True) as server:
        config = RunConfig(
            model="m",
            base_url=server.base_url,
            group_size=1,
            output=output,
        )
        await run_environment(TwoTurnEnv(), config)
        bodies = [r.body for r in server.requests if r.body and "messages" in r.body]
    line = json.loads(output.read_text().splitlines()[1])
    first, second = line["model_calls"]
    assert "prompt_token_ids" in first and "prompt_token_ids_added" in second
    trajectory = Trajectory.from_json(line)
    template = ToyChatTemplate()
    calls = trajectory.model_calls
    for call, body in zip(calls, bodies, strict=True):
        assert call.prompt_token_ids == tuple(template.prompt_ids(body["messages"], body["tools"]))
    assert calls[1].continues(calls[0])
    assert trajectory.token_prefix_breaks == 0


def _edited(path: Path, edit: Any) -> Path:
    """``path`` with ``edit(model_calls)`` applied to its first rollout line (line 2)."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    edit(record["model_calls"])
    lines[1] = json.dumps(record)  # NaN and Infinity as the literals json writes
    edited = path.with_name("edited.jsonl")
    edited.write_text("\n".join(lines) + "\n")
    return edited


def _set(call: int, field: str, index: int, value: Any) -> Any:
    def edit(calls: list[dict[str, Any]]) -> None:
        calls[call][field][index] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            _set(0, "completion_token_ids", 0, 2**63),
            "model_calls[0]: completion_token_ids must hold integers in [0, 2**63),"
            " got 9223372036854775808 at index 0",
        ),
        (
            _set(0, "prompt_token_ids", 1, 2**64),
            "model_calls[0]: prompt_token_ids must hold integers in [0, 2**63)",
        ),
        (
            _set(1, "prompt_token_ids_added", 0, -3),
            "model_calls[1]: prompt_token_ids must hold integers in [0, 2**63), got -3",
        ),
        (
            _set(1, "completion_logprobs", 0, 0.75),
            "model_calls[1]: completion_logprobs must hold finite log-probabilities <= 0,"
            " got 0.75 at index 0",
        ),
        (_set(0, "completion_logprobs", 0, float("nan")), "got nan at index 0"),
        (_set(0, "completion_logprobs", 0, float("-inf")), "got -inf at index 0"),
        (_set(0, "completion_logprobs", 0, 10**400), "got inf at index 0"),
        (_set(0, "completion_logprobs", 0, "-0.5"), "must hold numbers, got '-0.5' at index 0"),
    ],
    ids=["id-2^63", "prompt-2^64", "added-negative", "positive", "nan", "-inf", "huge-int", "text"],
)
async def test_an_edited_results_file_is_refused_with_file_and_line(
    tmp_path: Path, edit: Any, said: str
) -> None:
    policy = scripted(
        [{"tool_calls": [{"name": "multiply", "arguments": {"left": 6, "right": 7}}]}, "42"],
    )
    output = tmp_path / "run.jsonl"
    async with MockModelServer(policy, tokens=True) as server:
        config = RunConfig(model="m", base_url=server.base_url, group_size=1, output=output)
        await run_environment(TwoTurnEnv(), config)
    assert read_results(output).rollouts[0].has_tokens  # the file as written reads back
    edited = _edited(output, edit)
    with pytest.raises(ResultsFileError) as refused:
        read_results(edited)
    assert str(refused.value).startswith(f"{edited}:2 is not a rollout record: ")
    assert said in str(refused.value)
    # Training reads through the same gate: no sample is ever built from the line.
    with pytest.raises(ResultsFileError, match=f"{edited.name}:2"):
        samples = [to_training_samples(t) for t in read_trajectories(edited)]
        del samples
