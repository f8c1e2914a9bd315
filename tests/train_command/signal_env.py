"""An addition task whose reward every random reply differs in: ``chars``, the length of the
reply / 20, so each group has variance and a training step moves the weights. A reply cut
by ``max_tokens`` counts as finished (scored). Reads ``examples/arithmetic``'s rows."""

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
from benchmax.rewards import extract_completion_text


class LengthSignalEnv(BaseEnv):
    reward_keys = ("chars",)
    max_turns = 1
    finish_reasons = {"length": "finished"}  # a random model's replies are cut: score them

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        question = f"What is {row['a']} + {row['b']}? Answer with the number only."
        payload = {"prompt_messages": [{"role": "user", "content": question}]}
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"chars": len(extract_completion_text(rollout.messages)) / 20}
