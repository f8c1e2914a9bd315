"""What a rollout's engine needs of its environment, stated as protocols, so that the engine
and the modules beside it never import ``env.py`` (which imports them).

``RolloutHooks`` is the public surface ``BaseEnv`` declares and a subclass may override (the
hooks and the ``tools`` and ``reward_keys`` settings); ``RewardHooks`` is the part scoring
needs (``reward_keys`` and ``compute_reward``), which a rescore also has. ``RolloutFactory``
makes the rollout a hook sees (``BaseRollout`` itself is one), and ``hook_name`` names a
hook as errors and logs do (``<Class>.<hook>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Messages, Tool
from benchmax.envs.shared_types import DatasetSplit, Example, RewardMap, RolloutAttempt

__all__ = ["RewardHooks", "RolloutFactory", "RolloutHooks", "hook_name"]


class RewardHooks[R](Protocol):
    """An environment's reward hook and the keys every reward map must have."""

    @property
    def reward_keys(self) -> Sequence[str]: ...

    async def compute_reward(self, rollout: R) -> RewardMap | None: ...


class RolloutHooks[R](RewardHooks[R], Protocol):
    """The public hooks and settings of a ``BaseEnv`` that one rollout calls."""

    @property
    def tools(self) -> Sequence[Any]: ...

    def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AbstractAsyncContextManager[object]: ...

    async def list_tools(self) -> list[Tool]: ...

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any: ...

    async def user_turn(
        self,
        rollout_id: str,
        messages: Sequence[Mapping[str, Any]],
        example: Example[JsonRow],
    ) -> str | None: ...


class RolloutFactory[R: RolloutAttempt](Protocol):
    """Makes a finished rollout (``BaseRollout`` is one)."""

    def __call__(
        self,
        *,
        rollout_id: str,
        termination_reason: str,
        rewards: RewardMap | None,
        messages: Messages,
        example_args: Mapping[str, Any],
        split: DatasetSplit,
    ) -> R: ...


def hook_name(owner: object, hook: str) -> str:
    """``<Class>.<hook>`` for ``owner``'s ``hook``, e.g. ``MathEnv.compute_reward``."""
    return f"{type(owner).__name__}.{hook}"
