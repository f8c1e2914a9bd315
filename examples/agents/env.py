"""Agent programs as environments: each rollout runs an unmodified program (``AgentEnv``).

Rows look like ``{"a": 12, "b": 7}``; the program gets the row as JSON on stdin and the
model at ``OPENAI_BASE_URL``. Reward ``correct``: the last integer the program printed is
``a + b``. One environment per kind of program::

    benchmax run examples/agents/env.py:ToolLoopAgent --mock-policy examples/agents/policy.py:policy
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmax.agents import AgentEnv, AgentRollout
from benchmax.envs import (
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    canonical_example_id,
)

HERE = Path(__file__).resolve().parent
_INTEGER = re.compile(r"-?\d+")


class SumAgent(AgentEnv):
    """The task and reward shared by the example programs."""

    reward_keys = ("correct",)
    max_turns = 8
    rollout_timeout = 120.0

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            HERE / f"{split}.jsonl", row_to_example=_example, max_examples=max_examples
        )

    async def compute_reward(self, rollout: AgentRollout) -> dict[str, float]:
        found = _INTEGER.findall(rollout.agent.stdout)
        expected = int(rollout.example_args["a"]) + int(rollout.example_args["b"])
        return {"correct": float(bool(found) and int(found[-1]) == expected)}


def _example(row: JsonRow) -> Example[JsonRow]:
    payload = {"a": int(row["a"]), "b": int(row["b"])}
    return Example(id=canonical_example_id(payload), payload=payload)


class ToolLoopAgent(SumAgent):
    """An OpenAI-SDK tool-calling loop (``tool_loop.py``)."""

    command = ("{python}", str(HERE / "tool_loop.py"))


class StreamingAgent(SumAgent):
    """A program that streams its reply (``streaming.py``)."""

    command = ("{python}", str(HERE / "streaming.py"))


class RewritingAgent(SumAgent):
    """A program that edits its history between calls (``rewrite_history.py``)."""

    command = ("{python}", str(HERE / "rewrite_history.py"))


class FanOutAgent(SumAgent):
    """A program that makes parallel calls (``fan_out.py``)."""

    command = ("{python}", str(HERE / "fan_out.py"))


class CurlAgent(SumAgent):
    """A shell pipeline of jq and curl (``curl_pipeline.sh``)."""

    command = ("sh", str(HERE / "curl_pipeline.sh"))
