"""Each model call records the weights version that sampled it, when the server says.

``benchmax train``'s sampler puts ``weights_version`` in every reply; here a small aiohttp
upstream in front of the token mock does the same (counting up per call), and both the
``BaseEnv`` chat loop and an ``AgentEnv`` program's captured calls carry it per call into
the results file."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.capture.support import versioned_upstream
from tests.training.test_token_records import TwoTurnEnv

from benchmax.agents import AgentEnv, AgentRollout
from benchmax.envs import Dataset, DatasetSplit, Example, JsonRow
from benchmax.results import ResultsFileError, read_results
from benchmax.runner import RunConfig, run_environment
from benchmax.testing import MockModelServer, scripted
from benchmax.trajectory import ModelCall, Trajectory

TOOL_CALL = {"tool_calls": [{"name": "multiply", "arguments": {"left": 6, "right": 7}}]}


def test_a_call_round_trips_its_weights_version() -> None:
    call = ModelCall(prompt_token_ids=(1,), completion_token_ids=(2,), weights_version=3)
    trajectory = Trajectory(
        rollout_id="r",
        example_id="e",
        termination_reason="finished",
        rewards={},
        model_calls=(call, ModelCall(seconds=0.5)),
    )
    line = json.loads(json.dumps(trajectory.to_json()))
    with_version, without = line["model_calls"]
    assert with_version["weights_version"] == 3
    assert "weights_version" not in without  # old readers see the lines they knew
    first, second = Trajectory.from_json(line).model_calls
    assert (first.weights_version, second.weights_version) == (3, None)
    assert first == call


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2", [0]])
def test_a_bad_weights_version_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="weights_version must be a non-negative integer"):
        ModelCall(weights_version=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="weights_version must be a non-negative integer"):
        ModelCall.from_json({"seconds": 0.0, "weights_version": bad})


@pytest.fixture
async def versioned() -> AsyncIterator[str]:
    """A token-mock upstream whose replies say which weights version sampled them:
    0, 1, 2, ... in call order (its base URL)."""
    async with versioned_upstream(scripted([TOOL_CALL, "42"])) as base_url:
        yield base_url


async def test_base_env_records_each_calls_weights_version(tmp_path: Path, versioned: str) -> None:
    output = tmp_path / "run.jsonl"
    config = RunConfig(model="m", base_url=versioned, group_size=1, output=output)
    await run_environment(TwoTurnEnv(), config)
    line = json.loads(output.read_text().splitlines()[1])
    assert [call["weights_version"] for call in line["model_calls"]] == [0, 1]
    (rollout,) = read_results(output).rollouts
    assert [call.weights_version for call in rollout.model_calls] == [0, 1]


async def test_a_server_without_versions_writes_none(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    async with MockModelServer(scripted([TOOL_CALL, "42"]), tokens=True) as server:
        config = RunConfig(model="m", base_url=server.base_url, group_size=1, output=output)
        await run_environment(TwoTurnEnv(), config)
    line = json.loads(output.read_text().splitlines()[1])
    assert all("weights_version" not in call for call in line["model_calls"])


TWO_CALLS = """
import json, os, sys
from openai import OpenAI
json.load(sys.stdin)
client = OpenAI()
messages = [{"role": "user", "content": "6*7?"}]
for _ in range(2):
    reply = client.chat.completions.create(model=os.environ["OPENAI_MODEL"], messages=messages)
    messages += [reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "again"}]
    print("weights_version" in (reply.model_extra or {}))
"""


class TwoCallAgent(AgentEnv):
    reward_keys = ("done",)
    command = (sys.executable, "-c", TWO_CALLS)
    rollout_timeout = 60.0

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        return Dataset([Example(id="ex-0", payload={})])

    async def compute_reward(self, rollout: AgentRollout) -> dict[str, float]:
        assert [call.weights_version for call in rollout.agent.calls] == [0, 1]
        assert rollout.agent.stdout.split() == ["False", "False"]  # the program never sees it
        return {"done": 1.0}


async def test_captured_calls_carry_their_weights_version(tmp_path: Path, versioned: str) -> None:
    output = tmp_path / "run.jsonl"
    config = RunConfig(model="m", base_url=versioned, group_size=1, output=output)
    await run_environment(TwoCallAgent(), config)
    line = json.loads(output.read_text().splitlines()[1])
    assert line["termination_reason"] == "finished" and line["rewards"] == {"done": 1.0}
    assert [call["weights_version"] for call in line["model_calls"]] == [0, 1]
    (rollout,) = read_results(output).rollouts
    assert [call.weights_version for call in rollout.model_calls] == [0, 1]


async def test_an_edited_weights_version_is_refused_with_file_and_line(
    tmp_path: Path, versioned: str
) -> None:
    output = tmp_path / "run.jsonl"
    config = RunConfig(model="m", base_url=versioned, group_size=1, output=output)
    await run_environment(TwoTurnEnv(), config)
    lines = output.read_text().splitlines()
    record = json.loads(lines[1])
    record["model_calls"][1]["weights_version"] = -2
    lines[1] = json.dumps(record)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsFileError) as caught:
        read_results(edited)
    message = str(caught.value)
    assert f"{edited}:2" in message
    assert "model_calls[1]: weights_version must be a non-negative integer or None, got -2" in (
        message
    )
