"""An environment whose reward hook blocks the event loop (a synchronous sleep inside
``async def``) from the third group on: for stopping a run that cannot see cancellation.

With ``BENCHMAX_TEST_BLOCKED_MARKER=PATH`` in the environment, the hook creates ``PATH``
when it starts blocking, so a test knows the loop is blocked before it sends a signal."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.runner.sample_envs import AnswerEnv

from benchmax.envs import BaseRollout


class BlockingEnv(AnswerEnv):
    calls = 0

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        BlockingEnv.calls += 1
        if BlockingEnv.calls > 4:
            marker = os.environ.get("BENCHMAX_TEST_BLOCKED_MARKER")
            if marker:
                Path(marker).touch()
            while True:  # the loop never runs again
                time.sleep(0.5)
        return await super().compute_reward(rollout)
