"""Faults the mock server injects instead of (or before) a normal answer."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Final, Literal

from benchmax._value_checks import is_finite_number, is_numeric
from benchmax.testing._errors import MockServerError

__all__ = ["Fault", "FaultKind", "FaultSchedule"]

FaultKind = Literal["status", "delay", "malformed", "drop", "no_choices", "raw"]

_ERROR_TYPES: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    422: "unprocessable_entity_error",
    429: "rate_limit_error",
}


def _error_type(status_code: int) -> str:
    if status_code in _ERROR_TYPES:
        return _ERROR_TYPES[status_code]
    return "server_error" if status_code >= 500 else "invalid_request_error"


class Fault(MockServerError):
    """One injected misbehavior of the mock server.

    Build faults with the class methods (``Fault.status(429, retry_after=1)``,
    ``Fault.delay(0.5)``, ``Fault.malformed()``, ``Fault.drop()``,
    ``Fault.no_choices()``, ``Fault.raw(body)``) and queue them with
    ``MockModelServer.inject``.
    A policy may also ``return`` or ``raise`` a fault (other than a delay) to
    misbehave on a particular call. Faults are immutable and compare by value.
    """

    __slots__ = (
        "_body",
        "_error_code",
        "_kind",
        "_message",
        "_retry_after",
        "_seconds",
        "_status_code",
    )
    _kind: FaultKind
    _status_code: int | None
    _error_code: str | None
    _message: str | None
    _retry_after: float | None
    _seconds: float | None
    _body: bytes | None

    def __init__(
        self,
        kind: FaultKind,
        *,
        status_code: int | None = None,
        error_code: str | None = None,
        message: str | None = None,
        retry_after: float | None = None,
        seconds: float | None = None,
        body: bytes | None = None,
    ) -> None:
        if kind not in ("status", "delay", "malformed", "drop", "no_choices", "raw"):
            raise ValueError(f"unknown fault kind: {kind!r}")
        super().__init__(kind, status_code, message)
        set_ = object.__setattr__
        set_(self, "_status_code", status_code)
        set_(self, "_error_code", error_code)
        set_(self, "_message", message)
        set_(self, "_retry_after", retry_after)
        set_(self, "_seconds", seconds)
        set_(self, "_body", body)
        set_(self, "_kind", kind)  # last: marks the fault as initialized (immutable)

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def status(
        cls,
        code: int,
        *,
        error_code: str | None = None,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> Fault:
        """Answer with HTTP ``code`` and an OpenAI-style ``{"error": {...}}`` body.

        ``error_code`` becomes ``error.code`` (e.g. ``"context_budget_exceeded"``);
        ``retry_after`` (seconds) adds a ``Retry-After`` header.
        """
        if isinstance(code, bool) or not isinstance(code, int) or not 400 <= code <= 599:
            raise ValueError("fault status code must be an integer from 400 to 599")
        if error_code is not None and not isinstance(error_code, str):
            raise TypeError("fault error_code must be a string or None")
        if message is not None and not isinstance(message, str):
            raise TypeError("fault message must be a string or None")
        if retry_after is not None:
            retry_after = _non_negative(retry_after, "fault retry_after")
        return cls(
            "status",
            status_code=code,
            error_code=error_code,
            message=message if message is not None else f"mock server injected HTTP {code}",
            retry_after=retry_after,
        )

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """Wait ``seconds`` before answering normally (the policy runs after the wait)."""
        return cls("delay", seconds=_non_negative(seconds, "fault delay"))

    @classmethod
    def malformed(cls) -> Fault:
        """Answer 200 with a body that is not valid JSON."""
        return cls("malformed")

    @classmethod
    def drop(cls) -> Fault:
        """Close the connection without sending any response."""
        return cls("drop")

    @classmethod
    def no_choices(cls) -> Fault:
        """Answer 200 with a well-formed completion whose ``choices`` list is empty."""
        return cls("no_choices")

    @classmethod
    def raw(cls, body: object, *, status: int = 200) -> Fault:
        """Answer HTTP ``status`` (200 by default) with exactly ``body`` as the JSON reply.

        ``bytes`` are sent as they are; any other value is sent as its JSON text
        (``json.dumps`` with ASCII escapes, so lone surrogates travel as ``\\ud800``
        and ``NaN``/``Infinity`` as the literals Python servers send). Use it to serve
        replies no policy would build: ``Fault.raw({"choices": [{"message": None}]})``.
        """
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise ValueError("fault raw status must be an integer from 200 to 599")
        if isinstance(body, bytes | bytearray | memoryview):
            data = bytes(body)
        else:
            try:
                data = json.dumps(body, ensure_ascii=True, allow_nan=True).encode("ascii")
            except (TypeError, ValueError, RecursionError) as error:
                raise TypeError(f"fault raw body must be bytes or a JSON value: {error}") from None
        return cls("raw", status_code=status, body=data)

    # -- read-only view -----------------------------------------------------------------------

    @property
    def kind(self) -> FaultKind:
        return self._kind

    @property
    def status_code(self) -> int | None:
        return self._status_code

    @property
    def error_code(self) -> str | None:
        return self._error_code

    @property
    def message(self) -> str | None:
        return self._message

    @property
    def retry_after(self) -> float | None:
        return self._retry_after

    @property
    def seconds(self) -> float | None:
        return self._seconds

    @property
    def body(self) -> bytes | None:
        """The exact response body of a raw fault."""
        return self._body

    @property
    def error_type(self) -> str | None:
        """The OpenAI ``error.type`` sent with a status fault."""
        return None if self._status_code is None else _error_type(self._status_code)

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, "_kind") and not name.startswith("__"):
            raise AttributeError("Fault is immutable")
        object.__setattr__(self, name, value)

    def _key(self) -> tuple[object, ...]:
        return (
            self._kind,
            self._status_code,
            self._error_code,
            self._message,
            self._retry_after,
            self._seconds,
            self._body,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fault):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_fault, self._key())

    def __repr__(self) -> str:
        match self._kind:
            case "status":
                extra = f"{self._status_code}, error_code={self._error_code!r}"
                if self._retry_after is not None:
                    extra += f", retry_after={self._retry_after!r}"
                return f"Fault.status({extra})"
            case "delay":
                return f"Fault.delay({self._seconds!r})"
            case "raw":
                body = self._body or b""
                shown = repr(body[:60]) + ("..." if len(body) > 60 else "")
                return f"Fault.raw({shown}, status={self._status_code})"
            case _:
                return f"Fault.{self._kind}()"

    def __str__(self) -> str:
        if self._kind == "status":
            return f"HTTP {self._status_code}: {self._message}"
        return repr(self)


def _rebuild_fault(
    kind: FaultKind,
    status_code: int | None,
    error_code: str | None,
    message: str | None,
    retry_after: float | None,
    seconds: float | None,
    body: bytes | None = None,
) -> Fault:
    return Fault(
        kind,
        status_code=status_code,
        error_code=error_code,
        message=message,
        retry_after=retry_after,
        seconds=seconds,
        body=body,
    )


def _non_negative(value: float, what: str) -> float:
    if not is_numeric(value):
        raise TypeError(f"{what} must be a number of seconds")
    if not is_finite_number(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0")
    return value


@dataclass(slots=True)
class _Queued:
    fault: Fault
    remaining: int | None  # calls left; None: forever


class FaultSchedule:
    """Queued faults: per session first, then for any session; FIFO within each queue.

    Each entry fires for ``times`` calls (``None``: every call, forever), then leaves
    the queue. An entry that never leaves hides the entries queued behind it.
    """

    __slots__ = ("_any", "_by_session")

    def __init__(self) -> None:
        self._any: deque[_Queued] = deque()
        self._by_session: dict[str, deque[_Queued]] = {}

    def add(self, fault: Fault, *, session: str | None, times: int | None) -> None:
        if not isinstance(fault, Fault):
            raise TypeError("inject() expects a Fault")
        if session is not None and not isinstance(session, str):
            raise TypeError("fault session must be a string or None")
        if times is not None and (isinstance(times, bool) or not isinstance(times, int)):
            raise TypeError("fault times must be a positive integer or None")
        if times is not None and times < 1:
            raise ValueError("fault times must be a positive integer or None")
        queue = self._any if session is None else self._by_session.setdefault(session, deque())
        queue.append(_Queued(fault, times))

    def take(self, session: str) -> Fault | None:
        """The fault for the next call of ``session``, consuming one use of it."""
        queue = self._by_session.get(session)
        if not queue:
            queue = self._any
            if not queue:
                return None
        entry = queue[0]
        if entry.remaining is not None:
            if entry.remaining == 1:
                queue.popleft()
            else:
                entry.remaining -= 1
        return entry.fault

    def clear(self) -> None:
        self._any.clear()
        self._by_session.clear()

    def pending(self) -> int:
        """Number of queued entries (an ``times=None`` entry counts once)."""
        return len(self._any) + sum(len(queue) for queue in self._by_session.values())
