"""An environment whose reward hook blocks the event loop (a synchronous sleep inside
``async def``) from the third group on: for stopping a run that cannot see cancellation."""

from __future__ import annotations

import time

from tests.runner.sample_envs import AnswerEnv

from benchmax.envs import BaseRollout


class BlockingEnv(AnswerEnv):
    calls = 0

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        BlockingEnv.calls += 1
        if BlockingEnv.calls > 4:
            while True:  # the loop never runs again
                time.sleep(0.5)
        return await super().compute_reward(rollout)
