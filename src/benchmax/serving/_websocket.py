"""The WebSocket side of a session: messages answered in order while the connection is
watched, refusals that the client reads, and closing from a callback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["REFUSAL_SECONDS", "close_soon", "refuse", "send", "serve_messages"]


async def send(ws: web.WebSocketResponse, data: object) -> None:
    await ws.send_str(orjson.dumps(data).decode())


async def serve_messages(
    ws: web.WebSocketResponse,
    handle: Callable[[str | bytes], Coroutine[Any, Any, tuple[object, bool]]],
) -> None:
    """Answer ``ws``'s messages in order with ``handle`` (a reply, and whether to stop).

    The connection is read while a message is handled: when the client goes away
    mid-step, the step is cancelled (and its episode closed) at once.
    """
    from aiohttp import WSMsgType

    inbox: asyncio.Queue[str | bytes | None] = asyncio.Queue()

    async def read() -> None:
        try:
            async for message in ws:
                if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    inbox.put_nowait(message.data)
                else:
                    break
        finally:
            inbox.put_nowait(None)

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
                await send(ws, reply)
            if stop:
                return
    except (ConnectionError, RuntimeError):
        return
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


REFUSAL_SECONDS = 10.0
"""How long a refused WebSocket stays open to answer the client's first message."""


async def refuse(ws: web.WebSocketResponse, refusal: dict[str, object]) -> None:
    """Send ``refusal`` at once, and again as the answer to the client's first message
    (a client that connects, then resets, reads it there), then close."""
    with contextlib.suppress(Exception):
        await send(ws, refusal)
        async with asyncio.timeout(REFUSAL_SECONDS):
            await ws.receive()
        await send(ws, refusal)
    with contextlib.suppress(Exception):
        await ws.close()


_CLOSING: set[asyncio.Task[object]] = set()


def close_soon(ws: web.WebSocketResponse) -> None:
    """Close ``ws`` from a callback (the session timed out); the task is kept until done."""
    task = asyncio.ensure_future(ws.close())
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)
