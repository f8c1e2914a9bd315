"""The retry policy of model calls (beyond.md §2): what is transient, how long to wait.

Transient: connection errors, timeouts, HTTP 408, 409, 429 and 5xx, unless the
server says otherwise with ``x-should-retry: false`` (``true`` makes any status
transient, as in the OpenAI SDK). A 5xx whose body says the request failed validation
("1 validation error for ...", "2 validation errors:", as pydantic and FastAPI word it:
llama-cpp-python's server answers 500 with that text for a body its types refuse) is
not transient: the same body fails the same way. The wait is exponential backoff with equal
jitter (base 0.5 s, cap 30 s), or what the server asks for with
``Retry-After-Ms`` / ``Retry-After`` (seconds or an HTTP date), capped at 60 s.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import re
import time
from collections.abc import Mapping

__all__ = [
    "backoff_sleep",
    "is_transient_status",
    "is_validation_failure",
    "retry_after_seconds",
    "retry_delay",
    "server_retry_verdict",
]

BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 60.0
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_VALIDATION_FAILURE = re.compile(r"\b\d+ validation errors?\b", re.IGNORECASE)


async def backoff_sleep(seconds: float) -> None:
    """Wait before a retry (a module-level seam so tests can shorten waits)."""
    await asyncio.sleep(seconds)


def retry_delay(retry_number: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``retry_number`` (1-based).

    A server's ``Retry-After`` wins (capped at 60 s); otherwise exponential
    backoff from 0.5 s, capped at 30 s, with equal jitter.
    """
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP)
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (retry_number - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def is_transient_status(status: int) -> bool:
    """Whether an HTTP status is worth retrying when the server gives no verdict."""
    return status in _TRANSIENT_STATUSES or status >= 500


def is_validation_failure(text: str) -> bool:
    """Whether an error body's text says the request failed validation (pydantic's and
    FastAPI's "N validation error(s)"): retrying the same body cannot help."""
    return _VALIDATION_FAILURE.search(text) is not None


def server_retry_verdict(headers: Mapping[str, str]) -> bool | None:
    """The server's ``x-should-retry`` verdict: ``True``, ``False`` or ``None`` (none given)."""
    value = headers.get("x-should-retry")
    if value is None:
        return None
    value = value.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    return None


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a failed response asks for (``Retry-After-Ms``, ``Retry-After`` in
    seconds or as an HTTP date), or ``None`` when it names none usable.

    ``headers`` must look names up case-insensitively (as HTTP client header maps do).
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            seconds = float(millis) / 1000
        except ValueError:
            pass
        else:
            return max(0.0, seconds) if math.isfinite(seconds) else None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        date = email.utils.parsedate_tz(value)
        if date is None:
            return None
        try:
            seconds = email.utils.mktime_tz(date) - time.time()
        except (OverflowError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None
