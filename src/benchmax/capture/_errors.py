"""The capture package's exception base."""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["CaptureError"]


class CaptureError(BenchmaxError):
    """Any error of the capture endpoint's own making. Programs never see these: a request
    the endpoint will not read is answered with an HTTP error, and a rollout's failure
    settles as its termination reason."""
