"""Environments for the Ray tests: paced, crashing and self-timing variants of ``NumberEnv``."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from tests.runner.sample_envs import NumberEnv, rollout_index

from benchmax.auth import StaticBearerAuth
from benchmax.envs import RolloutAttempt, RolloutRequest

logger = logging.getLogger("tests.ray.envs")


class PacedEnv(NumberEnv):
    """Example 0 finishes at once; every other group takes ``slow`` seconds."""

    def __init__(self, count: int = 10, *, slow: float = 1.5) -> None:
        super().__init__(count)
        self.slow = slow

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        if request.example.payload["value"] != 0:
            await asyncio.sleep(self.slow)
        return await super().run_rollout(request)


class CrashEnv(NumberEnv):
    """The worker process dies (``os._exit``) on the first attempt at example ``crash_on``."""

    def __init__(self, count: int = 10, *, crash_on: int = 2, delay: float = 0.2) -> None:
        super().__init__(count, delay=delay)
        self.crash_on = crash_on

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        if request.example.payload["value"] == self.crash_on and ".a1-" in request.rollout_id:
            await asyncio.sleep(0.1)
            os._exit(1)
        return await super().run_rollout(request)


class IntervalEnv(NumberEnv):
    """Each rollout sleeps ``delay`` and reports when it ran and in which process."""

    reward_keys = ("start", "end", "pid")

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        start = time.time()
        await asyncio.sleep(self.delay)
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"start": start, "end": time.time(), "pid": float(os.getpid())},
        )


class TellingEnv(NumberEnv):
    """Logs the model key it was given (the runner must mask it) and one INFO record."""

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        auth = request.model_auth
        token = auth.token if isinstance(auth, StaticBearerAuth) else "none"
        logger.warning("rollout %d sees key %s", rollout_index(request.rollout_id), token)
        return await super().run_rollout(request)


class PickyEnv(NumberEnv):
    """Refuses to construct unless ``key`` is ``"right"`` (the message repeats the key)."""

    def __init__(self, key: str) -> None:
        if key != "right":
            raise ValueError(f"key {key} is\nnot right")
        super().__init__(3)
