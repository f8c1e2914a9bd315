"""The base of the model-HTTP layer's exceptions.::

BenchmaxError
└── ModelHTTPError
    ├── ModelStatusError     an error HTTP status (chat)
    ├── ModelReplyError      a reply that cannot be used (chat)
    ├── AttemptTimedOut      an attempt past its deadline (deadlines)
    ├── ModelsUnreachable    ``GET /models`` failed (models_probe)
    └── _Unusable            internal to replies
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["ModelHTTPError"]


class ModelHTTPError(BenchmaxError):
    """Any error of the model-HTTP layer: a failed or unusable model reply, an attempt past
    its deadline, an unreachable ``/models`` endpoint."""
