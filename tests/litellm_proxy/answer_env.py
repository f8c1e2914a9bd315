"""A one-turn environment scored the reasoning-aware way: ``extract_answer_block``.

Rows of ``data/eval.jsonl`` look like ``{"prompt": ..., "ground_truth": ...}``.
"""

from __future__ import annotations

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
from benchmax.rewards import extract_answer_block, extract_completion_text


class AnswerTagEnv(BaseEnv):
    """Rewards the ``<answer>`` the model gives after its reasoning."""

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
            "prompt_messages": [{"role": "user", "content": row["prompt"]}],
            "ground_truth": row["ground_truth"],
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_answer_block(extract_completion_text(rollout.messages))
        return {"correct": float(answer == rollout.example_args["ground_truth"])}
