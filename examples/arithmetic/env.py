"""A one-turn short-answer task: add two small numbers, reply with the sum alone.

Rows look like ``{"a": 12, "b": 7}``. Rewards: ``correct`` (the reply states ``a + b``: one
of its integers is the sum) and ``bare`` (the reply is nothing but an integer). The prompt
shows one worked exchange (``2 + 3`` -> ``5``) before the question. A 135M instruction model
starts by explaining its sum ("12 + 7 = 19") and learns to answer ``19``.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    canonical_example_id,
)
from benchmax.rewards import extract_completion_text

INSTRUCTIONS = "Answer with the number only."
EXAMPLE_TURNS = (  # one worked exchange shows the format
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "5"},
)
_INTEGER = re.compile(r"-?\d+")


class ArithmeticEnv(BaseEnv):
    """``What is a + b?``; the reply should be the sum and nothing else."""

    reward_keys = ("correct", "bare")
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        payload = {
            "prompt_messages": [
                {"role": "system", "content": INSTRUCTIONS},
                *EXAMPLE_TURNS,
                {"role": "user", "content": f"What is {row['a']} + {row['b']}?"},
            ],
            "answer": int(row["a"]) + int(row["b"]),
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = extract_completion_text(rollout.messages).strip()
        found = _INTEGER.findall(reply)
        answer = rollout.example_args["answer"]
        return {
            "correct": 1.0 if any(int(number) == answer for number in found) else 0.0,
            "bare": 1.0 if _INTEGER.fullmatch(reply) else 0.0,
        }
