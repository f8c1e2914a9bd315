"""The base of ``benchmax.datagen``'s exceptions.::

BenchmaxError
└── DatagenError
    ├── CorpusError (ValueError)        _corpus
    ├── ReplyShapeError (ValueError)    _prompts
    ├── TraceFormatError (ValueError)   _trace_formats
    ├── TracesError (ValueError)        _traces
    ├── RecordShapeError                _logged_calls (internal)
    └── RequestFailed                   _tasks (internal)
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["DatagenError"]


class DatagenError(BenchmaxError):
    """Any error of ``benchmax.datagen``: an unreadable corpus or trace file, a teacher
    reply or logged record of the wrong shape, a failed teacher request."""
