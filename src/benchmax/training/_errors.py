"""The base of ``benchmax.training``'s exceptions.::

BenchmaxError
└── TrainingError
    ├── TrainError                  _trainer
    ├── ConfigError (ValueError)    _config
    └── RequestError (ValueError)   _chat_format (internal)
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["TrainingError"]


class TrainingError(BenchmaxError):
    """Any error of ``benchmax.training``: ``TrainError`` (a run could not start or had
    to stop), ``ConfigError`` (a bad training option), or a sampler request error."""
