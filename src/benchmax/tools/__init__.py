"""Tools for ``BaseEnv``: typed functions (``@tool``), ``Toolset``s sharing per-rollout
state, and tool providers (``MCPServer``) behind the ``ToolProvider``/``ToolSession`` seam;
and ``SimulatedUser``, a user played by a model endpoint for ``BaseEnv.user_turn``.

Names are exported lazily (``import benchmax.tools`` imports no optional dependency;
``MCPServer`` imports the ``mcp`` SDK on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmax._lazy_names import lazy_attribute

if TYPE_CHECKING:
    from benchmax.tools._errors import MCPServerError, ToolError, ToolLayerError
    from benchmax.tools._function import FunctionTool, tool
    from benchmax.tools._mcp import MCPServer
    from benchmax.tools._provider import ToolProvider, ToolSession
    from benchmax.tools._simulated_user import DEFAULT_USER_INSTRUCTIONS, SimulatedUser
    from benchmax.tools._toolset import Toolset

__all__ = [
    "DEFAULT_USER_INSTRUCTIONS",
    "FunctionTool",
    "MCPServer",
    "MCPServerError",
    "SimulatedUser",
    "ToolError",
    "ToolLayerError",
    "ToolProvider",
    "ToolSession",
    "Toolset",
    "tool",
]

_EXPORTS = {
    "DEFAULT_USER_INSTRUCTIONS": "benchmax.tools._simulated_user",
    "FunctionTool": "benchmax.tools._function",
    "MCPServer": "benchmax.tools._mcp",
    "MCPServerError": "benchmax.tools._errors",
    "SimulatedUser": "benchmax.tools._simulated_user",
    "ToolError": "benchmax.tools._errors",
    "ToolLayerError": "benchmax.tools._errors",
    "ToolProvider": "benchmax.tools._provider",
    "ToolSession": "benchmax.tools._provider",
    "Toolset": "benchmax.tools._toolset",
    "tool": "benchmax.tools._function",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
