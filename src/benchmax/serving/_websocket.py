"""The WebSocket side of a session: messages answered in order while the connection is
watched, refusals that the client reads, all through a bounded :class:`WebSocketLink`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from benchmax.serving._wire import Inbox, WebSocketLink

__all__ = ["REFUSAL_SECONDS", "refuse", "serve_messages"]


async def serve_messages(
    link: WebSocketLink,
    handle: Callable[[str | bytes], Coroutine[Any, Any, tuple[object, bool]]],
) -> None:
    """Answer the link's messages in order with ``handle`` (a reply, and whether to stop).

    The connection is read while a message is handled: when the client goes away
    mid-step, the step is cancelled (and its episode closed) at once. At most
    ``wire.max_queue_bytes`` of messages wait; past it the socket is not read.
    """
    from aiohttp import WSMsgType

    inbox = Inbox(link.wire.max_queue_bytes)

    async def read() -> None:
        try:
            async for message in link.ws:
                if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    await inbox.put(message.data)
                else:
                    break
        finally:
            inbox.end()

    reader = asyncio.create_task(read())
    try:
        while (raw := await inbox.get()) is not None:
            handling: asyncio.Task[tuple[object, bool]] = asyncio.create_task(handle(raw))
            await asyncio.wait({handling, reader}, return_when=asyncio.FIRST_COMPLETED)
            if not handling.done():  # the connection ended first
                handling.cancel()
                await asyncio.gather(handling, return_exceptions=True)
                return
            reply, stop = handling.result()
            if reply is not None:
                await link.send(reply)
            if stop:
                return
    except (ConnectionError, RuntimeError):
        return
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


REFUSAL_SECONDS = 10.0
"""How long a refused WebSocket stays open to answer the client's first message."""


async def refuse(link: WebSocketLink, refusal: dict[str, object]) -> None:
    """Send ``refusal`` at once, and again as the answer to the client's first message
    (a client that connects, then resets, reads it there), then close."""
    with contextlib.suppress(Exception):
        await link.send(refusal)
        async with asyncio.timeout(REFUSAL_SECONDS):
            await link.ws.receive()
        await link.send(refusal)
    await link.close()
