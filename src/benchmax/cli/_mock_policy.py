"""The embedded mock model as the commands name it: the model name a run records when it
answers, and the policy a ``--mock-policy`` spec names."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from benchmax.cli._targets import TargetError, import_object

if TYPE_CHECKING:  # benchmax.testing is imported on first use
    from benchmax.testing import Policy

__all__ = ["MOCK_MODEL", "load_mock_policy"]

MOCK_MODEL = "mock-model"


def load_mock_policy(spec: str) -> Policy:
    """``echo``, ``tool_exerciser``, ``package.module:function`` or ``file.py:function``."""
    from benchmax.testing import load_policy

    if spec.rpartition(":")[0].endswith(".py"):
        policy, _module = import_object(spec, "mock policy")
        if not callable(policy):
            raise TargetError(f"mock policy {spec!r} is not callable")
        return cast("Policy", policy)  # a user's function: the server checks its replies
    try:
        return load_policy(spec)
    except (ValueError, TypeError) as error:
        raise TargetError(str(error)) from error
