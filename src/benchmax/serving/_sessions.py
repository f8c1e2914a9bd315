"""Sessions: capacity, example choice, idle timeouts and cleanup of served episodes.

A session holds one slot of ``max_sessions`` (a WebSocket connection, an HTTP episode
or an MCP session) and at most one live :class:`Episode` at a time. A session idle for
longer than ``session_timeout`` is closed by the reaper: its episode is cancelled
(tools and their processes close) and its slot freed; so a client that vanishes
never leaks one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from benchmax.envs import Environment, Example
from benchmax.serving._bridge import PolicyBridge
from benchmax.serving._episode import Episode, Turn
from benchmax.serving._errors import ServingError
from benchmax.serving._wire import Wire

__all__ = ["CapacityReached", "Channel", "ResetOptions", "Session", "Sessions", "UnknownExample"]

logger = logging.getLogger("benchmax.serving")

MAX_ID_LENGTH = 255
"""The longest id a client may name (episode, example, request and NeMo-Gym session ids)."""


class CapacityReached(ServingError):
    """Every session slot is taken."""

    def __init__(self, active: int, maximum: int) -> None:
        super().__init__(
            f"the server is at capacity: {active} of {maximum} sessions are active (--max-sessions)"
        )
        self.active = active
        self.maximum = maximum


class UnknownExample(ServingError):
    """A reset named an example id the split does not have, or an episode id in use."""


@dataclass(frozen=True, slots=True)
class ResetOptions:
    """How a reset picks its example and names its episode.

    ``example_id`` picks that example; else ``seed`` picks example ``seed % N`` of the
    split's N (the same seed always gives the same example); else the examples are taken
    in dataset order, round robin. ``episode_id`` names the episode (and its rollout id);
    a fresh one is made when it is ``None``. ``record_tokens`` asks every action for
    its exact tokens.
    """

    seed: int | None = None
    episode_id: str | None = None
    example_id: str | None = None
    record_tokens: bool = False

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ResetOptions:
        """Read a reset request's fields; raises ``ValueError`` naming a bad one."""
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError("seed must be a non-negative integer")
        names: dict[str, str | None] = {}
        for key in ("episode_id", "example_id"):
            value = data.get(key)
            if value is not None and (
                not isinstance(value, str) or not value or len(value) > MAX_ID_LENGTH
            ):
                raise ValueError(
                    f"{key} must be a non-empty string of at most {MAX_ID_LENGTH} characters"
                )
            names[key] = value
        record_tokens = data.get("record_tokens", False)
        if not isinstance(record_tokens, bool):
            raise ValueError("record_tokens must be true or false")
        return cls(seed, names["episode_id"], names["example_id"], record_tokens)


type Channel = Literal["websocket", "http", "mcp"]
"""What holds a session: a WebSocket connection, HTTP ``/reset`` (an episode the client
names by id in every request) or an MCP ``openenv/session/create``."""


class Session:
    """One slot: its live episode (if any) and when it was last used.

    ``stepping`` is true while an HTTP step (or reset) of the episode is answered: a
    second one is refused rather than applied to a turn its client never saw.
    """

    def __init__(self, sessions: Sessions, session_id: str, channel: Channel) -> None:
        self.id = session_id
        self.channel: Channel = channel
        self.stepping = False
        self.episode: Episode | None = None
        self.last_active = time.monotonic()
        self.on_expire: Callable[[], None] | None = None
        self._sessions = sessions
        self._released = False

    def touch(self) -> None:
        self.last_active = time.monotonic()

    @property
    def released(self) -> bool:
        """Whether the slot was freed (the session is over)."""
        return self._released

    @property
    def idle_seconds(self) -> float:
        """Seconds since the session was last used (0 while a step is answered)."""
        last = self.last_active
        if self.episode is not None:
            if self.episode.busy:
                return 0.0
            last = max(last, self.episode.last_active)
        return time.monotonic() - last

    async def reset(self, options: ResetOptions) -> tuple[Episode, Turn]:
        """Close the current episode and start a new one; its first turn."""
        self.touch()
        await self.close_episode()
        episode = self._sessions.new_episode(options)
        self.episode = episode
        self._sessions.by_episode[episode.rollout_id] = self
        turn = await episode.start()
        self.touch()
        return episode, turn

    async def close_episode(self) -> None:
        episode, self.episode = self.episode, None
        if episode is not None:
            self._sessions.by_episode.pop(episode.rollout_id, None)
            await episode.close()

    async def release(self) -> None:
        """Close the episode and free the slot (idempotent)."""
        await self.close_episode()
        if not self._released:
            self._released = True
            self._sessions.free(self)


class Sessions:
    """Every live session of one server, over one environment and its examples."""

    def __init__(
        self,
        env: Environment[Any, Any],
        examples: Sequence[Example[object]],
        bridge: PolicyBridge,
        *,
        split: str,
        max_sessions: int,
        session_timeout: float | None,
        context: contextvars.Context,
        wire: Wire,
    ) -> None:
        if not examples:
            raise ValueError("the split has no examples to serve")
        self.env = env
        self.examples = list(examples)
        self.split = split
        self.max_sessions = max_sessions
        self.session_timeout = session_timeout
        self.by_episode: dict[str, Session] = {}
        self.wire = wire
        self._by_id: dict[str, Example[object]] = {
            example.id: example for example in reversed(self.examples)
        }
        self._bridge = bridge
        self._context = context
        self._live: dict[str, Session] = {}
        self._order = itertools.cycle(range(len(self.examples)))

    @property
    def active(self) -> int:
        return len(self._live)

    def open(self, channel: Channel) -> Session:
        """A new session; raises ``CapacityReached`` when every slot is taken."""
        if len(self._live) >= self.max_sessions:
            raise CapacityReached(len(self._live), self.max_sessions)
        session = Session(self, uuid.uuid4().hex, channel)
        self._live[session.id] = session
        return session

    def free(self, session: Session) -> None:
        self._live.pop(session.id, None)

    def session(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def pick(self, options: ResetOptions) -> Example[object]:
        if options.example_id is not None:
            example = self._by_id.get(options.example_id)
            if example is None:
                raise UnknownExample(
                    f"the {self.split} split has no example with id {options.example_id!r}"
                )
            return example
        if options.seed is not None:
            return self.examples[options.seed % len(self.examples)]
        return self.examples[next(self._order)]

    def new_episode(self, options: ResetOptions) -> Episode:
        rollout_id = options.episode_id or uuid.uuid4().hex
        if rollout_id in self.by_episode:
            raise UnknownExample(f"episode_id {rollout_id!r} is already in use")
        return Episode(
            self.env,
            self.pick(options),
            rollout_id,
            self._bridge,
            split=self.split,
            context=self._context,
            record_tokens=options.record_tokens,
        )

    async def reap_forever(self) -> None:
        """Close sessions idle past ``session_timeout``, checking a few times per timeout."""
        timeout = self.session_timeout
        if timeout is None:
            return
        interval = min(max(timeout / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            for session in list(self._live.values()):
                if session.idle_seconds > timeout:
                    logger.info("benchmax.serve.session_timed_out session_id=%s", session.id)
                    if session.on_expire is not None:
                        session.on_expire()
                    await session.release()

    async def aclose(self) -> None:
        """Close every session (at shutdown)."""
        for session in list(self._live.values()):
            if session.on_expire is not None:
                session.on_expire()
            with contextlib.suppress(Exception):
                await session.release()

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._live.values()))
