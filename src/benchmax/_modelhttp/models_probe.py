"""``GET {base_url}/models``: whether an endpoint answers its credential, without tokens.

The run's endpoint check (``benchmax run``, before anything starts) and the judge check
(each judge and simulated user, before the first group) ask this way. One attempt, never
retried (a check answers now or the run does not start), ``timeout`` seconds in all,
over ``httpx`` (imported on first use), honoring the proxy environment variables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmax._modelhttp.errors import ModelHTTPError

__all__ = ["ModelsAnswer", "ModelsUnreachable", "get_models"]

DEFAULT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ModelsAnswer:
    """The endpoint's answer: its HTTP ``status`` and body ``text``."""

    status: int
    text: str

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` when it is not."""
        return json.loads(self.text)

    def excerpt(self, limit: int = 200) -> str:
        """The body on one line, at most ``limit`` characters (``(no body)`` when empty)."""
        text = " ".join(self.text.split())
        return text[:limit] + ("..." if len(text) > limit else "") if text else "(no body)"


class ModelsUnreachable(ModelHTTPError):
    """The endpoint could not be asked (connection refused, timeout, invalid URL or
    header); ``error`` is what the HTTP client raised."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error) or type(error).__name__)
        self.error = error


async def get_models(
    base_url: str, headers: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> ModelsAnswer:
    """``GET {base_url}/models`` with ``headers``; any status is an answer.

    Raises :class:`ModelsUnreachable` when no answer came.
    """
    import httpx

    url = base_url.rstrip("/") + "/models"
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            reply = await client.get(url, headers=dict(headers))
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
        raise ModelsUnreachable(error) from error
    return ModelsAnswer(status=reply.status_code, text=reply.text)
