"""Errors of the tool layer.

::

    BenchmaxError
    └── ToolLayerError         any error of the tool layer (``except`` it to catch them all)
        ├── ToolError          raised by a tool: its message is the tool's result, the rollout
        │                      goes on
        ├── MCPServerError     an MCP server failed (start-up, lost connection, protocol
        │                      error): the rollout ends as ``tool_error``
        ├── ConnectionLost     internal (_mcp_connection), told to the caller as MCPServerError
        │   └── StartupTimedOut
        └── ProtocolFailure    internal (_mcp_connection)

Any other exception a tool raises ends the rollout as ``tool_error``.
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["MCPServerError", "ToolError", "ToolLayerError"]


class ToolLayerError(BenchmaxError):
    """Any error of the tool layer: a ``ToolError`` a tool raised for the model to read,
    or an ``MCPServerError``. (Not to be raised by a tool: raise ``ToolError`` for the
    model to see, anything else to end the rollout as ``tool_error``.)"""


class ToolError(ToolLayerError):
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


class MCPServerError(ToolLayerError):
    """An MCP server failed a rollout: it did not start within ``startup_timeout``, its
    connection was lost (it crashed, was killed, refused the connection) and the call
    could not be retried, or it answered with a protocol error. Raised from an
    ``MCPServer`` session, it ends that rollout as ``tool_error``; other rollouts go on.
    The message names the server (``MCPServer.label``) with its secrets masked."""
