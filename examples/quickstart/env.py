"""A one-turn question-answering environment, the smallest useful BaseEnv.

Rows of ``train.jsonl`` / ``eval.jsonl`` look like ``{"prompt": ..., "ground_truth": ...}``.
The model is asked to put its answer in ``<answer>`` tags; the reward is 1.0 when the
tagged answer matches the ground truth (case-insensitive), else 0.0.

    uv run benchmax run examples/quickstart/env.py:QuickStartEnv --data examples/quickstart \
        --mock-policy examples/quickstart/policy.py:reply
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

SYSTEM_PROMPT = "Answer the question concisely. Put your final answer in <answer></answer> tags."
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


class QuickStartEnv(BaseEnv):
    """Asks one question per example and rewards the exact tagged answer."""

    reward_keys = ("correct",)
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
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": row["prompt"]},
            ],
            "ground_truth": row["ground_truth"],
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        match = _ANSWER.search(text)
        answer = match.group(1).strip().lower() if match else ""
        expected = str(rollout.example_args["ground_truth"]).strip().lower()
        return {"correct": 1.0 if answer == expected else 0.0}
