"""Environments and helpers shared by the runner, CLI and example tests."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    Dataset,
    DatasetSplit,
    Environment,
    Example,
    JsonlDataset,
    JsonRow,
    RolloutAttempt,
    RolloutFailure,
    RolloutRequest,
    canonical_example_id,
)
from benchmax.runner import RunConfig


def rollout_index(rollout_id: str) -> int:
    match = re.search(r"\.r(\d+)$", rollout_id)
    assert match is not None, rollout_id
    return int(match.group(1))


class NumberEnv(Environment[dict[str, Any], RolloutAttempt]):
    """A group-native env without a model: reward = (value + rollout index) % 3 == 0.

    Payload ``{"value": n}``; ``{"fail": "reason"}`` raises that ``RolloutFailure`` on
    rollout index 1; ``{"broken": true}`` raises a contract error at once.
    """

    reward_keys = ("hit", "value")

    def __init__(self, count: int = 10, *, delay: float = 0.0) -> None:
        self.count = count
        self.delay = delay
        self.dataset_calls: list[dict[str, Any]] = []
        self.running_groups = 0
        self.peak_groups = 0
        self.started: list[int] = []
        self.payloads: list[dict[str, Any]] | None = None

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        self.dataset_calls.append({"split": split, "max_examples": max_examples})
        payloads = self.payloads or [{"value": n} for n in range(self.count)]
        if max_examples is not None:
            payloads = payloads[:max_examples]
        return Dataset([Example(id=f"ex-{i}", payload=p) for i, p in enumerate(payloads)])

    async def run_group(self, requests: Sequence[RolloutRequest[dict[str, Any]]]) -> Any:
        self.running_groups += 1
        self.peak_groups = max(self.peak_groups, self.running_groups)
        self.started.append(requests[0].example.payload.get("value", -1))
        try:
            return await super().run_group(requests)
        finally:
            self.running_groups -= 1

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        payload = request.example.payload
        if payload.get("broken"):
            raise KeyError("broken payload")
        if self.delay:
            await asyncio.sleep(self.delay)
        k = rollout_index(request.rollout_id)
        if "fail" in payload and k == 1:
            raise RolloutFailure(payload["fail"], f"rollout {k} failed on purpose")
        value = payload["value"]
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"hit": float((value + k) % 3 == 0), "value": float(value)},
        )


class NoCapEnv(NumberEnv):
    """``create_dataset`` without ``max_examples``: the runner must take the first n."""

    async def create_dataset(  # type: ignore[override]
        self, split: DatasetSplit, base_dir: Path
    ) -> Dataset[dict[str, Any]]:
        self.dataset_calls.append({"split": split})
        return Dataset([Example(id=f"ex-{i}", payload={"value": i}) for i in range(self.count)])


class AnswerEnv(BaseEnv):
    """A BaseEnv over ``<base_dir>/<split>.jsonl`` rows ``{"question", "answer"}``."""

    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=_answer_example, max_examples=max_examples
        )

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = rollout.messages[-1]["content"] or ""
        return {"correct": float(reply.strip() == rollout.example_args["answer"])}


def _answer_example(row: JsonRow) -> Example[JsonRow]:
    payload = {
        "prompt_messages": [{"role": "user", "content": row["question"]}],
        "answer": row["answer"],
    }
    return Example(id=canonical_example_id(payload), payload=payload)


def write_answer_data(directory: Path, count: int = 6, split: str = "eval") -> Path:
    rows = [
        {"question": f"q{i}", "answer": f"q{i}" if i % 2 == 0 else "other"} for i in range(count)
    ]
    path = directory / f"{split}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def number_config(tmp_path: Path, **changes: Any) -> RunConfig:
    options: dict[str, Any] = {
        "model": "m",
        "base_url": "http://unused.invalid/v1",
        "group_size": 3,
        "output": tmp_path / "results.jsonl",
    }
    options.update(changes)
    return RunConfig(**options)
