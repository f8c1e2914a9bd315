"""Small BaseEnv environments whose reward hooks the rescore tests exercise."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    RewardMap,
    RolloutFailure,
    canonical_example_id,
)

LEAKED_KEY = "sk-rescore-test-0123456789"


class ScoreEnv(BaseEnv):
    """``correct``: the last message equals the example's answer; ``length``: a group key.

    A last message containing CRASH makes ``compute_reward`` raise, JUDGE raise a
    ``judge_error`` failure, GROUPFAIL makes the group hook raise.
    """

    reward_keys = ("correct", "length")
    max_turns = 1
    scored: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.scored = []

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=example)

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap:
        self.scored.append(rollout.rollout_id)
        text = str(rollout.messages[-1]["content"])
        if "CRASH" in text:
            raise RuntimeError("the reward crashed")
        if "LEAK" in text:
            raise RuntimeError(f"the judge rejected key {LEAKED_KEY}")
        if "SLOW" in text:
            await asyncio.sleep(30)
        if "RAISES_TIMEOUT" in text:
            raise TimeoutError("a timeout inside the hook")
        if "JUDGE" in text:
            raise RolloutFailure("judge_error", "the judge is down")
        return {"correct": float(text == rollout.example_args["answer"])}

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap]:
        if any("GROUPFAIL" in str(r.messages[-1]["content"]) for r in rollouts):
            raise ValueError("the group hook broke")
        return {r.rollout_id: {"length": float(len(r.messages))} for r in rollouts}


class NotFiniteEnv(ScoreEnv):
    """A non-finite reward: a hook defect that settles as reward_error, as in a run (§7)."""

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap:
        return {"correct": float("nan")}


class NotNumericEnv(ScoreEnv):
    """Breaks the reward contract: a reward that is not a number."""

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap:
        return {"correct": "high"}  # type: ignore[dict-item]


def example(row: Mapping[str, Any]) -> Example[JsonRow]:
    payload = {
        "prompt_messages": [{"role": "user", "content": row["question"]}],
        "answer": row["answer"],
    }
    return Example(id=canonical_example_id(payload), payload=payload)


class BoundedEnv(ScoreEnv):
    """``reward_timeout`` (beyond section 7) bounds one ``compute_reward`` call."""

    reward_timeout = 0.2
