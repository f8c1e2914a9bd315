"""Arithmetic variants for the learning-signal tests: one whose train rollouts all fail
(their rollout context raises before the model is called), one whose reward never varies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from examples.arithmetic.env import ArithmeticEnv

from benchmax.envs import BaseRollout, Example, JsonRow


class FailingTrainEnv(ArithmeticEnv):
    """Rows with ``"fail": true`` (the train split of the test) fail to set up."""

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        example = super()._example(row)
        return Example(id=example.id, payload={**example.payload, "fail": bool(row.get("fail"))})

    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        if example.payload.get("fail"):
            raise RuntimeError("the sandbox did not start")
        yield


class ConstantRewardEnv(ArithmeticEnv):
    """Every rollout scores 0: every group has zero reward variance."""

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"correct": 0.0, "bare": 0.0}
