"""Exact tokens in the rollout record: compact lines, rounded logprobs, what a run writes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.envs.base.support import MULTIPLY_TOOL

from benchmax.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit, Example, JsonRow
from benchmax.runner import RunConfig, run_environment
from benchmax.testing import MockModelServer, ToyChatTemplate, scripted
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
