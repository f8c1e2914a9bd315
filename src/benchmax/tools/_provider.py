"""The tool-provider seam: how ``BaseEnv.tools`` entries that are not plain functions
(an MCP server, a remote tool service) offer tools to one rollout.

``BaseEnv`` opens one ``ToolSession`` per provider when a rollout starts (inside its
``rollout_context``), lists the session's tools once, routes the model's calls to it,
and closes it when the rollout ends, whatever the outcome (failure and cancellation
included). ``tool_timeout`` bounds ``list_tools`` and each ``call_tool``; a hung call is
cancelled. ``open_session`` is not bounded by ``tool_timeout``: a provider bounds its own
start-up (``MCPServer``: ``startup_timeout``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["ToolProvider", "ToolSession"]


@runtime_checkable
class ToolSession(Protocol):
    """One rollout's connection to a provider's tools."""

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools this session offers, as OpenAI function-tool dicts
        (``{"type": "function", "function": {"name", "description", "parameters"}}``)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run tool ``name`` with the model's decoded ``arguments`` (already checked
        against the tool's ``parameters`` schema).

        The result becomes the tool message's content: a ``str``, a JSON-encodable
        value (encoded as ``BaseEnv`` encodes every tool result), or a list of
        content parts (``{"type": "text"|"image_url", ...}``). Raise ``ToolError(msg)``
        for an error the model should see (the rollout goes on); any other exception
        ends the rollout as ``tool_error``.
        """
        ...

    async def aclose(self) -> None:
        """Release the session (close the connection, stop a subprocess). Called once,
        also after a failed or cancelled rollout; must not raise on a broken session."""
        ...


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools in ``BaseEnv.tools``; pickled with the environment (bundles),
    so it holds configuration, not live connections."""

    async def open_session(self, rollout_id: str) -> ToolSession:
        """A session for rollout ``rollout_id`` (one per rollout by default; a provider
        may hand every rollout the same shared session, whose ``aclose`` is then its
        own business). Raising ends that rollout as ``tool_error``. ``BaseEnv`` does not
        time it (only a ``rollout_timeout`` would end it): bound start-up here."""
        ...
