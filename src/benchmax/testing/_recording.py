"""What the mock server remembers about each request, with credentials masked in text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

__all__ = ["RecordedRequest", "mask_header_value", "masked_headers"]

SECRET_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}
)


def mask_header_value(name: str, value: str) -> str:
    """``value`` with its secret part replaced by ``***`` when ``name`` carries credentials.

    ``Authorization: Bearer sk-123`` becomes ``Bearer ***`` (the scheme stays readable).
    """
    if name.lower() not in SECRET_HEADERS:
        return value
    scheme, space, _ = value.partition(" ")
    return f"{scheme} ***" if space else "***"


def masked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` safe to print or log."""
    return {name: mask_header_value(name, value) for name, value in headers.items()}


@dataclass(frozen=True, slots=True, repr=False)
class RecordedRequest:
    """One HTTP request the mock server received.

    ``session`` names the URL prefix the request came through (``""`` for the plain
    ``/v1`` base URL; see ``MockModelServer.session_url``). ``headers`` has lower-case
    names. ``body`` is the parsed JSON body (``None`` when the body was empty, not
    JSON or refused as too large; ``raw_body`` keeps the bytes received). ``time`` is
    ``time.time()`` at arrival; ``connection`` numbers the TCP connection it came on
    (from 1, per server), so keep-alive reuse is visible.
    Its ``repr`` masks credential headers; the real values stay readable in ``headers``.
    """

    session: str
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    time: float
    raw_body: bytes = field(default=b"", compare=False)
    connection: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.headers, MappingProxyType):
            object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header value, if any."""
        return self.headers.get("authorization")

    @property
    def messages(self) -> list[Any]:
        """``body["messages"]``, or ``[]`` when absent."""
        body = self.body
        messages = body.get("messages") if isinstance(body, dict) else None
        return messages if isinstance(messages, list) else []

    def __repr__(self) -> str:
        return (
            f"RecordedRequest(session={self.session!r}, method={self.method!r}, "
            f"path={self.path!r}, headers={masked_headers(self.headers)!r}, "
            f"body={self.body!r}, time={self.time!r})"
        )

    __str__ = __repr__
