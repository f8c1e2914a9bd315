"""Serve a benchmax environment over the field's protocols (``benchmax serve``).

``serving(env, ServeOptions(protocol=...))`` runs the environment's split as a server on
127.0.0.1 while the ``async with`` block runs; ``serve`` runs it until cancelled.

- ``protocol="openenv"``: an OpenEnv environment server (``/reset``, ``/step``,
  ``/state``, ``/schema``, ``/metadata``, ``/health``, ``/ws``, ``/mcp``) as
  openenv-core's clients expect. Each episode is a real benchmax rollout whose model is
  the client: every model call of the rollout becomes an observation, and the client's
  next action (``{"message": {"role": "assistant", ...}}``) answers it; tools, simulated
  user turns, limits and reward hooks run exactly as in a local rollout.
- ``protocol="nemo-gym"``: a NeMo-Gym resources server (``/seed_session``, one route per
  tool, ``/verify`` with ``reward`` and ``reward_components``, ``/close_session``).

The web server is aiohttp's (``benchmax[serve]``), imported when a server starts.
"""

from benchmax.serving._actions import AssistantMessage, PolicyAction
from benchmax.serving._episode import Turn
from benchmax.serving._errors import ServingError
from benchmax.serving._server import (
    PROTOCOLS,
    Protocol,
    RunningServer,
    ServeOptions,
    SplitError,
    serve,
    serving,
)

__all__ = [
    "PROTOCOLS",
    "AssistantMessage",
    "PolicyAction",
    "Protocol",
    "RunningServer",
    "ServeOptions",
    "ServingError",
    "SplitError",
    "Turn",
    "serve",
    "serving",
]
