"""Replies remembered by ``request_id``, so a retried HTTP step answers what the first
answered instead of being applied twice."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

__all__ = ["StepReplies"]

type Reply = tuple[int, bytes]
"""An HTTP status and the encoded body sent."""


class StepReplies:
    """The replies of the last steps that carried a ``request_id``, keyed by
    ``(episode_id, request_id)``: at most ``max_entries`` of them and ``max_bytes`` of
    bodies (the oldest are forgotten first; a body larger than ``max_bytes`` is not kept).

    ``answer(key, step)`` runs ``step`` once per key: a repeat while it runs waits for
    its reply, a repeat after it gets the reply remembered.
    """

    def __init__(self, *, max_entries: int = 4096, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._done: OrderedDict[tuple[str, str], Reply] = OrderedDict()
        self._running: dict[tuple[str, str], asyncio.Future[Reply]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._done)

    @property
    def remembered_bytes(self) -> int:
        return self._bytes

    def known(self, key: tuple[str, str]) -> bool:
        """Whether ``key`` has a reply (or one on the way)."""
        return key in self._done or key in self._running

    async def answer(
        self,
        key: tuple[str, str],
        step: Callable[[], Awaitable[tuple[Reply, bool]]],
    ) -> Reply:
        """The reply for ``key``: remembered, awaited from the run in progress, or
        ``step()``'s (a reply and whether to remember it: the action was applied)."""
        while (running := self._running.get(key)) is not None:
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # the first run ended without a reply (its client went away): run it here
        if (done := self._done.get(key)) is not None:
            self._done.move_to_end(key)
            return done
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            reply, applied = await step()
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._running[key]
        if applied:
            self._remember(key, reply)
        future.set_result(reply)
        return reply

    def forget_episode(self, episode_id: str) -> None:
        """Forget the replies of ``episode_id`` (it was reset: its request ids start
        over)."""
        for key in [key for key in self._done if key[0] == episode_id]:
            _, body = self._done.pop(key)
            self._bytes -= len(body)

    def _remember(self, key: tuple[str, str], reply: Reply) -> None:
        size = len(reply[1])
        if size > self.max_bytes:
            return
        self._done[key] = reply
        self._bytes += size
        while len(self._done) > self.max_entries or self._bytes > self.max_bytes:
            _, (_, body) = self._done.popitem(last=False)
            self._bytes -= len(body)
