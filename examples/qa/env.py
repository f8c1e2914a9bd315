"""Question answering on rows ``{"prompt", "ground_truth"}``, such as ``generate-qa`` writes.

The model answers in ``<answer>`` tags; the reward ``correct`` is 1.0 when the tagged answer
equals the ground truth after normalization (case, punctuation, a leading article), else
0.0. Extra row fields (``source``) travel in the payload for inspection but are not scored.

    uv run benchmax generate-qa examples/corpus -o qa --mock-policy examples/corpus/policy.py:reply
    uv run benchmax run examples/qa/env.py:CorpusQAEnv --data qa \
        --mock-policy examples/qa/policy.py:answer
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
from benchmax.rewards import extract_answer_block, extract_completion_text

SYSTEM_PROMPT = (
    "Answer the question with a short phrase: a name, number, date or term. "
    "Put only the answer inside <answer></answer> tags."
)
_ARTICLE = re.compile(r"^(the|a|an)\s+")
_PUNCTUATION = re.compile(r"[^\w\s]")


def normalized(text: str) -> str:
    """Lower case, no punctuation, single spaces, no leading article."""
    text = " ".join(_PUNCTUATION.sub(" ", text.lower()).split())
    return _ARTICLE.sub("", text)


class CorpusQAEnv(BaseEnv):
    """One question per example; rewards the normalized exact tagged answer."""

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
            "source": row.get("source"),
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = normalized(extract_answer_block(extract_completion_text(rollout.messages)))
        expected = normalized(str(rollout.example_args["ground_truth"]))
        return {"correct": 1.0 if answer and answer == expected else 0.0}
