"""OpenEnv environments written with openenv-core's own server classes, for the tests.

* ``GuessEnvironment``: guess a number from 1 to 20 (``Random(seed)``) in at most
  ``MAX_GUESSES`` actions; each observation says ``higher``/``lower``; a right guess
  ends the episode with reward 1.0, each wrong one costs -0.1.
* ``CalculatorEnvironment``: an MCP environment (FastMCP tools ``add`` and
  ``finish``); ``finish(answer)`` ends the episode with reward 1.0 when the answer is
  ``a + b`` of the reset's numbers.
"""

from __future__ import annotations

import random
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

MAX_GUESSES = 4


class GuessAction(Action):
    message: str = Field(..., description="The guess, as text")


class GuessObservation(Observation):
    prompt: str = ""
    feedback: str = ""


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._target = 0
        self._state = State(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._target = random.Random(seed).randint(1, 20)
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(
            prompt="Guess my number from 1 to 20. Reply with the number only.", reward=0.0
        )

    def step(
        self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GuessObservation:  # type: ignore[override]
        self._state.step_count += 1
        try:
            guess = int(action.message.strip())
        except ValueError:
            guess = -1
        if guess == self._target:
            return GuessObservation(feedback="correct", reward=1.0, done=True)
        done = self._state.step_count >= MAX_GUESSES
        feedback = "higher" if guess < self._target else "lower"
        return GuessObservation(feedback=feedback, reward=-0.1, done=done)

    @property
    def state(self) -> State:
        return self._state


class CalculatorEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("calculator")
        self._numbers = (0, 0)
        self._finished: float | None = None

        @mcp.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @mcp.tool
        def finish(answer: int) -> str:
            """Submit the final answer."""
            self._finished = 1.0 if answer == sum(self._numbers) else 0.0
            return "submitted"

        super().__init__(mcp)
        self._state = State(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        rng = random.Random(seed)
        self._numbers = (rng.randint(1, 50), rng.randint(1, 50))
        self._finished = None
        self._state = State(episode_id=episode_id, step_count=0)
        a, b = self._numbers
        return CalculatorObservation(task=f"Compute {a} + {b} with the tools, then call finish.")

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        observation = super().step(action, timeout_s=timeout_s, **kwargs)
        if self._finished is not None:
            observation.reward = self._finished
            observation.done = True
        return observation

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if self._finished is not None:
            observation.reward = self._finished
            observation.done = True
        return observation

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return CalculatorObservation(task="only tool calls are actions here")

    @property
    def state(self) -> State:
        return self._state


class CalculatorObservation(Observation):
    task: str = ""
