"""Environments for the validation tests: one good one and one broken per check."""

from __future__ import annotations

import math
import sys
import threading
import uuid
from pathlib import Path
from types import MappingProxyType
from typing import Any

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


class GoodEnv(BaseEnv):
    """Rows ``{"prompt", "ground_truth"}``; 1.0 when the reply contains the ground truth."""

    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self.example, max_examples=max_examples
        )

    def payload(self, row: JsonRow) -> dict[str, Any]:
        return {
            "prompt_messages": [{"role": "user", "content": row["prompt"]}],
            "ground_truth": row["ground_truth"],
        }

    def example(self, row: JsonRow) -> Example[JsonRow]:
        payload = self.payload(row)
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        return {"correct": float(str(rollout.example_args["ground_truth"]) in text)}


class NotAnEnv:
    reward_keys = ("correct",)


class AbstractEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1


class NeedsArgumentEnv(GoodEnv):
    def __init__(self, *, level: int) -> None:
        super().__init__()
        self.level = level


class FailingConstructorEnv(GoodEnv):
    def __init__(self) -> None:
        raise RuntimeError("cannot find the grader config")


class NoRewardKeysEnv(GoodEnv):
    reward_keys = ()


class RepeatedRewardKeysEnv(GoodEnv):
    reward_keys = ("correct", "correct")


class RandomIdEnv(GoodEnv):
    def example(self, row: JsonRow) -> Example[JsonRow]:
        return Example(id=uuid.uuid4().hex, payload=self.payload(row))


class ConstantIdEnv(GoodEnv):
    def example(self, row: JsonRow) -> Example[JsonRow]:
        return Example(id="same", payload=self.payload(row))


class NotJsonPayloadEnv(GoodEnv):
    def example(self, row: JsonRow) -> Example[JsonRow]:
        payload = {**self.payload(row), "weight": math.nan, "tags": {"a"}}
        return Example(id=row["prompt"], payload=payload)


class BadRoleEnv(GoodEnv):
    def payload(self, row: JsonRow) -> dict[str, Any]:
        return {**super().payload(row), "prompt_messages": [{"role": "human", "content": "hi"}]}


class BadContentEnv(GoodEnv):
    def payload(self, row: JsonRow) -> dict[str, Any]:
        message = {"role": "user", "content": [{"type": "text", "txt": row["prompt"]}]}
        return {**super().payload(row), "prompt_messages": [message]}


class BadToolSchemaEnv(GoodEnv):
    async def list_tools(self) -> list[dict[str, Any]]:
        parameters = {"type": "object", "properties": {"q": {"type": "strng"}}}
        return [{"type": "function", "function": {"name": "search", "parameters": parameters}}]


class ReadOnlyToolSchemaEnv(GoodEnv):
    async def list_tools(self) -> list[dict[str, Any]]:
        parameters = MappingProxyType({"type": "object", "properties": {}})
        return [{"type": "function", "function": {"name": "search", "parameters": parameters}}]


class BadToolNameEnv(GoodEnv):
    async def list_tools(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "web search", "parameters": {}}}]


class WrongRewardKeyEnv(GoodEnv):
    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"accuracy": 1.0}


class NoMaxTurnsEnv(GoodEnv):
    max_turns = None


class RaisingRewardEnv(GoodEnv):
    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        raise KeyError("answer_key")


class UnpicklableArgumentEnv(GoodEnv):
    def __init__(self, *, lock: Any = None) -> None:
        super().__init__()
        self.lock = lock


LOCK = threading.Lock()

REGISTRY = "benchmax_validation_test_registry"


class ProcessBoundEnv(GoodEnv):
    """Loads its rows from a module registered at run time in this process only."""

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Any:
        from benchmax.envs import Dataset

        return Dataset(self.example(row) for row in sys.modules[REGISTRY].ROWS)
