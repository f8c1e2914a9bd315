"""The context variables that several layers set and read, in one place.

Each is set for the duration of a block by the module that owns the behaviour and read
by the code running inside it (tasks created in the block copy the binding):

- ``CURRENT_ROLLOUT_ID`` / ``CURRENT_GROUP_RIDS``: the rollout (or the rollouts of a
  group hook) that is running, for log attribution. Public as
  ``benchmax.envs.logging._CURRENT_ROLLOUT_ID`` / ``_CURRENT_GROUP_RIDS`` (the spec names
  them there), set by ``rollout_context`` / ``group_context``.
- ``ANNOTATIONS``: the annotations of the rollout being recorded (``None``: not
  recording), set by ``benchmax.trajectory.recording_annotations`` and filled by
  ``benchmax.trajectory.annotate``.

A variable whose value type belongs to one module lives there instead, so this module
imports nothing from benchmax but ``_json_types``: ``benchmax.auth._BOUND_MODEL_AUTH``
(the providers ``InjectedAuth`` resolves against, set by ``bind_model_auth``),
``benchmax._observer``'s observer of finished BaseEnv rollouts (``observe_rollouts``) and
``benchmax._hook_deadlines``' default deadlines of hooks the environment leaves unbounded
(``with_hook_deadlines``, bound by the group pipeline).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmax._json_types import JSONValue

__all__ = [
    "ANNOTATIONS",
    "CURRENT_GROUP_RIDS",
    "CURRENT_ROLLOUT_ID",
]

CURRENT_ROLLOUT_ID: ContextVar[str | None] = ContextVar("benchmax_capture_rollout_id", default=None)
CURRENT_GROUP_RIDS: ContextVar[tuple[str, ...] | None] = ContextVar(
    "benchmax_capture_group_rids", default=None
)
ANNOTATIONS: ContextVar[dict[str, JSONValue] | None] = ContextVar(
    "benchmax_rollout_annotations", default=None
)
