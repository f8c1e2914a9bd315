"""Rows written by ``benchmax traces``: the logged history as the prompt, the logged reply as
the reference. The reward ``matches`` is 1.0 when the reply equals the reference after
normalization (case, whitespace), ``concise`` when it stays under 200 characters.

    uv run benchmax traces examples/traces/logs -o traces-data \
        --baseline examples/traces/env.py:LoggedRepliesEnv
    uv run benchmax run examples/traces/env.py:LoggedRepliesEnv --data traces-data --split eval
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
from benchmax.rewards import extract_completion_text


def normalized(text: str) -> str:
    return " ".join(text.lower().split())


class LoggedRepliesEnv(BaseEnv):
    """One example per row; ``prompt`` rows become one user message."""

    reward_keys = ("matches", "concise")
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        history = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
        payload = {"prompt_messages": history, "ground_truth": row["ground_truth"]}
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        reference = str(rollout.example_args["ground_truth"])
        return {
            "matches": float(normalized(text) == normalized(reference)),
            "concise": float(len(text) < 200),
        }
