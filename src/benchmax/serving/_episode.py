"""One served episode: a real benchmax rollout whose model is the remote policy.

The rollout runs as a local rollout does (``benchmax.training.collect_group`` on a group
of one): tools, simulated-user turns, limits and reward hooks are the environment's own.
Its model calls go to the :class:`PolicyBridge`; each one becomes an observation (the
messages the model would be sent since the last action, and the tools), and the policy's
next action answers it. When the rollout settles, the last observation carries the
reward map, the termination reason and the trajectory.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Sized
from dataclasses import dataclass, field
from typing import Any, cast

from benchmax.envs import Environment, Example, RolloutRequest
from benchmax.results import TrajectoryGroup
from benchmax.runner import NoModelAuth
from benchmax.serving._actions import PolicyAction, completion_reply
from benchmax.serving._bridge import ModelCall, PolicyBridge
from benchmax.serving._errors import ServingError
from benchmax.training import collect_group

__all__ = ["Episode", "EpisodeError", "Turn"]

logger = logging.getLogger("benchmax.serving")

POLICY_MODEL = "policy"
"""The model name served rollouts send (the bridge answers for any name)."""

_BODY_KEYS = frozenset({"model", "messages", "tools"})


class EpisodeError(ServingError):
    """An action the episode cannot take now (it is over, or not awaiting one); with
    ``broken``, the environment raised a contract error and the episode is over."""

    def __init__(self, message: str, *, broken: bool = False) -> None:
        super().__init__(message)
        self.broken = broken


@dataclass(frozen=True, slots=True)
class Turn:
    """What the policy sees after a reset or a step.

    ``messages`` are the messages added since the policy's last action (at reset: the
    whole prompt); ``tools`` the advertised tools (OpenAI function-tool dicts) and
    ``sampling_args`` the request's other body fields (``temperature``...), both as the
    environment sent them with this model call. When ``done``: ``reward`` is the scalar
    (the environment's ``reward_weights``), ``rewards`` the reward map,
    ``termination_reason`` why the rollout ended and ``trajectory`` its record
    (``Trajectory.to_json()``).
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    sampling_args: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    reward: float | None = None
    rewards: dict[str, float] | None = None
    termination_reason: str | None = None
    trajectory: dict[str, Any] | None = None


class Episode:
    """A rollout of ``example`` driven step by step by the policy.

    ``await start()`` runs the rollout up to its first model call (or its end) and
    returns the first :class:`Turn`; ``await act(action)`` answers the waiting model
    call and returns the next; ``await close()`` cancels whatever still runs (tools and
    their processes close as in a cancelled local rollout). ``last_active`` is the
    ``time.monotonic()`` of the last reset, step or model call.
    """

    def __init__(
        self,
        env: Environment[Any, Any],
        example: Example[object],
        rollout_id: str,
        bridge: PolicyBridge,
        *,
        split: str,
        context: contextvars.Context,
        record_tokens: bool = False,
    ) -> None:
        self.env = env
        self.example = example
        self.rollout_id = rollout_id
        self.split = split
        self.record_tokens = record_tokens
        self.step_count = 0
        self.last_active = time.monotonic()
        self.final: Turn | None = None
        self.tools: list[dict[str, object]] = []
        self._bridge = bridge
        self._context = context
        self._task: asyncio.Task[TrajectoryGroup] | None = None
        self._event: asyncio.Future[ModelCall | None] | None = None
        self._pending: ModelCall | None = None
        self._seen = 0
        self._lock = asyncio.Lock()

    @property
    def busy(self) -> bool:
        """Whether a reset or a step is being answered (the session is not idle)."""
        return self._lock.locked()

    @property
    def awaiting_action(self) -> bool:
        return self._pending is not None

    @property
    def done(self) -> bool:
        return self.final is not None

    async def start(self) -> Turn:
        """Start the rollout; its first turn (``done`` at once when it never calls
        the model)."""
        async with self._lock:
            if self._task is not None:
                raise EpisodeError("the episode has already started")
            request = RolloutRequest(
                rollout_id=self.rollout_id,
                example=self.example,
                model=POLICY_MODEL,
                base_url=self._bridge.base_url(self.rollout_id),
                model_auth=NoModelAuth(),
                split="eval" if self.split == "eval" else "train",
                record_tokens=self.record_tokens,
            )
            self._event = asyncio.get_running_loop().create_future()
            self._bridge.listen(self.rollout_id, self._offer)
            self._task = asyncio.create_task(
                collect_group(self.env, [request]),
                name=f"benchmax-serve-{self.rollout_id}",
                context=self._context.copy(),
            )
            self._task.add_done_callback(self._settled)
            return await self._next_or_close()

    async def act(self, action: PolicyAction) -> Turn:
        """Answer the waiting model call with ``action``; the next turn.

        Raises ``EpisodeError`` when the episode is over or not yet started."""
        async with self._lock:
            if self.final is not None:
                raise EpisodeError("the episode is over: reset to start another")
            call = self._pending
            if call is None:
                raise EpisodeError("the episode has not started: reset first")
            self._pending = None
            self.step_count += 1
            self.last_active = time.monotonic()
            self._seen = len(cast("Sized", call.body.get("messages") or ())) + 1
            call.answer(completion_reply(action, str(call.body.get("model") or POLICY_MODEL)))
            return await self._next_or_close()

    async def close(self) -> None:
        """Cancel the rollout (if it still runs) and wait until it has unwound."""
        self._bridge.forget(self.rollout_id)
        if self._pending is not None:
            self._pending.drop()
            self._pending = None
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _offer(self, call: ModelCall) -> bool:
        event = self._event
        if event is None or event.done():
            return False
        self.last_active = time.monotonic()
        event.set_result(call)
        return True

    def _settled(self, task: asyncio.Task[TrajectoryGroup]) -> None:
        if self._event is not None and not self._event.done():
            self._event.set_result(None)

    async def _next_or_close(self) -> Turn:
        """The next turn; a caller that gives up waiting (cancelled: its client went
        away) closes the episode, whose rollout would otherwise wait for it."""
        try:
            return await self._next()
        except asyncio.CancelledError:
            await asyncio.shield(self.close())
            raise

    async def _next(self) -> Turn:
        assert self._event is not None and self._task is not None
        call = await self._event
        self._event = asyncio.get_running_loop().create_future()
        if call is not None:
            self._pending = call
            return self._observation(call.body)
        self._bridge.forget(self.rollout_id)
        try:
            group = self._task.result()
        except asyncio.CancelledError:
            raise EpisodeError("the episode was closed") from None
        except Exception as error:
            logger.error(
                "benchmax.serve.episode_failed rollout_id=%s: %s",
                self.rollout_id,
                error,
                exc_info=error,
            )
            raise EpisodeError(
                f"the environment broke its contract: {type(error).__name__}: {error}",
                broken=True,
            ) from error
        self.final = self._final(group)
        return self.final

    def _observation(self, body: dict[str, object]) -> Turn:
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        tools = body.get("tools")
        self.tools = list(tools) if isinstance(tools, list) else []
        return Turn(
            messages=[dict(m) for m in messages[self._seen :] if isinstance(m, dict)],
            tools=self.tools,
            sampling_args={k: v for k, v in body.items() if k not in _BODY_KEYS},
        )

    def _final(self, group: TrajectoryGroup) -> Turn:
        trajectory = group.trajectories[0]
        messages = list(trajectory.messages or ())
        return Turn(
            messages=[dict(m) for m in messages[self._seen :]],
            done=True,
            reward=group.scalar_rewards[0],
            rewards=dict(trajectory.rewards),
            termination_reason=trajectory.termination_reason,
            trajectory=dict(trajectory.to_json()),
        )
