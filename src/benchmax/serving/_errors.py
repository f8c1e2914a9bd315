"""The base of ``benchmax.serving``'s exceptions.::

BenchmaxError
└── ServingError
    ├── SplitError          _server
    ├── EpisodeError        _episode (internal)
    ├── CapacityReached     _sessions (internal)
    ├── UnknownExample      _sessions (internal)
    ├── UnknownTool         _mcp (internal)
    ├── BodyTimeout         _wire (internal)
    ├── BodyTooLarge        _wire (internal)
    ├── _RpcError           _mcp (internal)
    └── _Refused            _nemo_gym, _openenv (internal, one each)
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["ServingError"]


class ServingError(BenchmaxError):
    """Any error of ``benchmax.serving``: a split the environment lacks (``SplitError``),
    or an episode or session request the server refuses."""
