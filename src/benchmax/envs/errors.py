"""The base of ``benchmax.envs``'s exceptions.::

    BenchmaxError
    └── EnvError
        ├── RolloutFailure (RuntimeError)       shared_types
        │   └── JudgeError                      benchmax.rewards.judge
        ├── RewardShapeError (ValueError)       shared_types
        ├── NotAsyncHook (TypeError)            _hook_errors
        ├── DuplicateToolName (ValueError)      base._tool_table
        └── ToolTimedOut                        base._tool_calls

``EnvError`` is not re-exported by ``benchmax.envs`` (the contract fixes that package's
names); import it from here.
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["EnvError"]


class EnvError(BenchmaxError):
    """Any error of ``benchmax.envs``: a ``RolloutFailure`` (an operational failure that
    settles one rollout; ``benchmax.rewards.JudgeError`` is one) or a contract error about
    an environment (``RewardShapeError``, ``NotAsyncHook``, ``DuplicateToolName``, ...)."""
