"""Model endpoints served inside this process: a URL prefix answered by a coroutine.

``benchmax serve`` answers its rollouts' model calls itself (the remote policy's
actions). Its endpoint has a real HTTP URL (environments with their own HTTP clients use
it), and it registers that URL's prefix here, so a :class:`ChatSession` whose URL starts
with it calls the handler directly: no socket, no connection to open under load, the
same status, JSON and failure handling as over HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

__all__ = ["Handler", "endpoint_for", "register", "unregister"]

Handler = Callable[[str, bytes], Awaitable[tuple[int, bytes]]]
"""Takes the request URL and JSON body; returns the HTTP status and the reply body."""

_ENDPOINTS: dict[str, Handler] = {}


def register(prefix: str, handler: Handler) -> None:
    """Answer every model call whose URL starts with ``prefix`` with ``handler``."""
    _ENDPOINTS[prefix] = handler


def unregister(prefix: str) -> None:
    _ENDPOINTS.pop(prefix, None)


def endpoint_for(url: str) -> Handler | None:
    """The in-process handler serving ``url``, if one is registered."""
    if not _ENDPOINTS:
        return None
    for prefix, handler in _ENDPOINTS.items():
        if url.startswith(prefix):
            return handler
    return None
