"""Errors of the tool layer.

::

    Exception
    ├── ToolError          raised by a tool: its message is the tool's result, the rollout goes on
    └── MCPServerError     an MCP server failed (start-up, lost connection, protocol error):
                           the rollout ends as ``tool_error``

Any other exception a tool raises ends the rollout as ``tool_error``.
"""

from __future__ import annotations

__all__ = ["MCPServerError", "ToolError"]


class ToolError(Exception):
    """An error the model should see: raised by a tool (a ``@tool`` function, a
    ``Toolset`` method, a hand-written ``run_tool`` or a ``ToolSession.call_tool``),
    its message becomes the tool message's content and the rollout goes on.

    ``ToolError("no such file: a.txt")`` -> tool message ``"no such file: a.txt"``.
    """

    def __init__(self, message: str) -> None:
        if not isinstance(message, str):
            raise TypeError("ToolError message must be a string")
        super().__init__(message)
        self.message = message


class MCPServerError(Exception):
    """An MCP server failed a rollout: it did not start within ``startup_timeout``, its
    connection was lost (it crashed, was killed, refused the connection) and the call
    could not be retried, or it answered with a protocol error. Raised from an
    ``MCPServer`` session, it ends that rollout as ``tool_error``; other rollouts go on.
    The message names the server (``MCPServer.label``) with its secrets masked."""
