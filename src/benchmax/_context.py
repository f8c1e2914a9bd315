"""The context variables shared by auth, the environments and the runner, in one place.

Each is set for the duration of a block by the module that owns the behaviour and read
by the code running inside it (tasks created in the block copy the binding):

- ``CURRENT_ROLLOUT_ID`` / ``CURRENT_GROUP_RIDS``: the rollout (or the rollouts of a
  group hook) that is running, for log attribution. Public as
  ``benchmax.envs.logging._CURRENT_ROLLOUT_ID`` / ``_CURRENT_GROUP_RIDS`` (the spec names
  them there), set by ``rollout_context`` / ``group_context``.
- ``BOUND_MODEL_AUTH``: the providers ``InjectedAuth`` resolves against; public as
  ``benchmax.auth._BOUND_MODEL_AUTH``, set by ``bind_model_auth``.
- ``ROLLOUT_OBSERVER``: the runner's observer of finished BaseEnv rollouts, set by
  ``benchmax.envs._observer.observe_rollouts``.
- ``HOOK_DEADLINES``: the default deadlines of hooks the environment leaves unbounded,
  set by the group pipeline (``benchmax.envs._hook_deadlines.with_hook_deadlines``).
- ``ANNOTATIONS``: the annotations of the rollout being recorded (``None``: not
  recording), set by ``benchmax.trajectory.recording_annotations`` and filled by
  ``benchmax.trajectory.annotate``.

This module sits below every layer that uses it and imports nothing from benchmax at run
time; the value types come from the owning modules for the type checker only.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmax._json_types import JSONValue
    from benchmax.auth import ModelAuth
    from benchmax.envs._hook_deadlines import HookDeadlines
    from benchmax.envs._observer import RolloutObserver

__all__ = [
    "ANNOTATIONS",
    "BOUND_MODEL_AUTH",
    "CURRENT_GROUP_RIDS",
    "CURRENT_ROLLOUT_ID",
    "HOOK_DEADLINES",
    "ROLLOUT_OBSERVER",
]

CURRENT_ROLLOUT_ID: ContextVar[str | None] = ContextVar("benchmax_capture_rollout_id", default=None)
CURRENT_GROUP_RIDS: ContextVar[tuple[str, ...] | None] = ContextVar(
    "benchmax_capture_group_rids", default=None
)
BOUND_MODEL_AUTH: ContextVar[dict[str, ModelAuth] | None] = ContextVar(
    "benchmax_bound_model_auth", default=None
)
ROLLOUT_OBSERVER: ContextVar[RolloutObserver | None] = ContextVar(
    "benchmax_rollout_observer", default=None
)
ANNOTATIONS: ContextVar[dict[str, JSONValue] | None] = ContextVar(
    "benchmax_rollout_annotations", default=None
)
HOOK_DEADLINES: ContextVar[HookDeadlines | None] = ContextVar(
    "benchmax_hook_deadlines", default=None
)
