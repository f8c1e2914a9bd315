"""Guess a number from 1 to 20, written with openenv-core's own server classes.

``reset(seed)`` picks the number with ``Random(seed)``; each ``step`` takes a
``GuessAction(message="7")`` and answers ``higher`` or ``lower``. A right guess ends the
episode with reward 1.0; each wrong one costs 0.1, and the episode ends after
``MAX_GUESSES`` guesses.
"""

from __future__ import annotations

import random
from typing import Any

from openenv.core.env_server.interfaces import Environment
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

    def step(  # type: ignore[override]
        self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GuessObservation:
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
