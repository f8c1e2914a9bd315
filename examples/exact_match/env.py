"""A one-turn task scored by exact match of the whole reply.

Rows look like ``{"question": "What is 37 * 4?", "answer": "148"}``. The reply must be
the bare answer: ``exact_match`` is 1.0 only when the stripped reply equals it, while
``contains_answer`` gives partial credit to a reply that mentions it among other words.
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

INSTRUCTIONS = "Reply with the number only: no words, no punctuation."


class ExactMatchEnv(BaseEnv):
    """Arithmetic questions; the reply must be exactly the number."""

    reward_keys = ("exact_match", "contains_answer")
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
                {"role": "user", "content": row["question"]},
            ],
            "answer": str(row["answer"]),
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = extract_completion_text(rollout.messages).strip()
        answer = rollout.example_args["answer"]
        numbers = re.findall(r"-?\d+", reply)
        return {
            "exact_match": 1.0 if reply == answer else 0.0,
            "contains_answer": 1.0 if answer in numbers else 0.0,
        }
