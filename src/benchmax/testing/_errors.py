"""The base of ``benchmax.testing``'s exceptions."""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["MockServerError"]


class MockServerError(BenchmaxError):
    """Any error of the mock model server: an injected ``Fault`` (a policy may raise one) or a
    policy's unusable answer (``PolicyResultError``, a ``TypeError``)."""
