"""A multi-turn tool task: compute ``(a + b) * c`` with calculator tools.

Rows look like ``{"a": 12, "b": 7, "c": 3, "answer": 57}``. The model may call ``add``
and ``multiply`` (OpenAI function tools) over several turns, then answers in
``<answer>`` tags. Rewards: ``correct`` (the tagged answer equals the expected value)
and ``used_tools`` (at least one tool call succeeded).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    Tool,
    canonical_example_id,
)
from benchmax.rewards import extract_completion_text

_ANSWER = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")
_NUMBER = {"type": "integer", "description": "an integer"}


def _tool(name: str, description: str) -> Tool:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"a": _NUMBER, "b": _NUMBER},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    }


class CalculatorEnv(BaseEnv):
    """Arithmetic with ``add`` and ``multiply`` tools over up to four turns."""

    reward_keys = ("correct", "used_tools")
    max_turns = 4
    max_tool_calls = 6

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        question = f"Compute ({row['a']} + {row['b']}) * {row['c']} using the tools."
        payload = {
            "prompt_messages": [
                {
                    "role": "system",
                    "content": "Use the calculator tools, then give the result as "
                    "<answer>N</answer>.",
                },
                {"role": "user", "content": question},
            ],
            "answer": int(row["answer"]),
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def list_tools(self) -> list[Tool]:
        return [_tool("add", "Add two integers."), _tool("multiply", "Multiply two integers.")]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        a, b = int(tool_args["a"]), int(tool_args["b"])
        if tool_name == "add":
            return {"result": a + b}
        if tool_name == "multiply":
            return {"result": a * b}
        raise ValueError(f"Unknown tool: {tool_name}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        match = _ANSWER.search(extract_completion_text(rollout.messages))
        correct = match is not None and int(match.group(1)) == rollout.example_args["answer"]
        used = any(
            message["role"] == "tool" and str(message["content"]).startswith('{"result"')
            for message in rollout.messages
        )
        return {"correct": float(correct), "used_tools": float(used)}
