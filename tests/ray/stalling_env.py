"""An environment whose tool blocks the event loop (a synchronous sleep inside ``async def``)
far past any rollout timeout in the rollouts of example ``STALL_ON``."""

from __future__ import annotations

import time
from typing import Any

from tests.runner.sample_envs import AnswerEnv

from benchmax.tools import tool

STALL_ON = 1


@tool
async def rest() -> str:
    """Take a short rest."""
    return "rested"


class StallingEnv(AnswerEnv):
    max_turns = 2
    tools = [rest]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if f".e{STALL_ON}." in rollout_id:
            time.sleep(600)  # the loop never runs again: no timeout or cancellation can act
        return await super().run_tool(rollout_id, tool_name, **tool_args)
