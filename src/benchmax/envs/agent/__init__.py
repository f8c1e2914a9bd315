"""``AgentEnv``: environments whose rollouts run agent programs through the capture
endpoint. Public face: ``benchmax.agents``."""

from benchmax.envs.agent._types import (
    AgentEndpoint,
    AgentOutput,
    AgentRollout,
    AgentRun,
    AgentTask,
)
from benchmax.envs.agent.env import INHERITED_VARIABLES, AgentEnv

__all__ = [
    "INHERITED_VARIABLES",
    "AgentEndpoint",
    "AgentEnv",
    "AgentOutput",
    "AgentRollout",
    "AgentRun",
    "AgentTask",
]
