"""Policies: how the mock model answers a chat-completions request.

A policy is a callable taking the request body (a dict) and, optionally, the
``RecordedRequest`` as a second positional argument (to see the session, headers,
path). It may be sync or async and returns

* a ``str``: the assistant's text (``finish_reason`` ``"stop"``);
* a message ``dict``: ``{"content": ..., "tool_calls": [...], "finish_reason": ...}``
  (every key optional; tool calls may be written in the OpenAI shape or the short
  ``{"name": ..., "arguments": {...}}`` form); or
* a ``Fault`` (returned or raised) to misbehave on this call.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

from benchmax.rewards.text import message_text
from benchmax.testing._faults import Fault
from benchmax.testing._recording import RecordedRequest
from benchmax.testing._schema_values import example_value

__all__ = [
    "Policy",
    "PolicyResult",
    "ScriptedPolicy",
    "ToolExerciser",
    "bind_policy",
    "echo",
    "load_policy",
    "message_text",
    "scripted",
    "tool_exerciser",
]

PolicyResult: TypeAlias = Mapping[str, object] | str | Fault
Policy: TypeAlias = Callable[..., PolicyResult | Awaitable[PolicyResult]]
BoundPolicy: TypeAlias = Callable[
    [dict[str, object], RecordedRequest], PolicyResult | Awaitable[PolicyResult]
]


def echo(body: Mapping[str, object]) -> str:
    """Repeat the text of the last user message (``""`` when there is none)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == "user":
                return message_text(message.get("content"))
    return ""


ScriptReply: TypeAlias = Mapping[str, object] | str | Fault
WhenExhausted: TypeAlias = Literal["error", "repeat_last", "cycle"]


class ScriptedPolicy:
    """Replays ``replies`` in order, separately for every session.

    When a session has used every reply, ``when_exhausted`` decides: ``"error"``
    (default) answers HTTP 500 with code ``script_exhausted``, ``"repeat_last"``
    repeats the final reply, ``"cycle"`` starts over. Faults in the script fire at
    their turn. ``reset()`` forgets every session's position.
    """

    __slots__ = ("_positions", "_replies", "_when_exhausted")

    def __init__(
        self, replies: Iterable[ScriptReply], *, when_exhausted: WhenExhausted = "error"
    ) -> None:
        self._replies: tuple[ScriptReply, ...] = tuple(replies)
        if not self._replies:
            raise ValueError("scripted() needs at least one reply")
        for index, reply in enumerate(self._replies):
            if not isinstance(reply, str | Mapping | Fault):
                raise TypeError(f"scripted reply {index} must be a str, a message dict or a Fault")
        if when_exhausted not in ("error", "repeat_last", "cycle"):
            raise ValueError("when_exhausted must be 'error', 'repeat_last' or 'cycle'")
        self._when_exhausted = when_exhausted
        self._positions: dict[str, int] = {}

    @property
    def replies(self) -> tuple[ScriptReply, ...]:
        """The script, in order."""
        return self._replies

    def position(self, session: str = "") -> int:
        """How many replies ``session`` has consumed."""
        return self._positions.get(session, 0)

    def reset(self) -> None:
        self._positions.clear()

    def __call__(self, body: Mapping[str, object], request: RecordedRequest) -> ScriptReply:
        session = request.session
        position = self._positions.get(session, 0)
        self._positions[session] = position + 1
        count = len(self._replies)
        if position < count:
            return self._replies[position]
        if self._when_exhausted == "repeat_last":
            return self._replies[-1]
        if self._when_exhausted == "cycle":
            return self._replies[position % count]
        return Fault.status(
            500,
            error_code="script_exhausted",
            message=(
                f"scripted mock policy exhausted: session {session!r} made call "
                f"{position + 1} but the script has {count} replies"
            ),
        )

    def __repr__(self) -> str:
        return f"scripted({len(self._replies)} replies, when_exhausted={self._when_exhausted!r})"


def scripted(
    replies: Iterable[ScriptReply], *, when_exhausted: WhenExhausted = "error"
) -> ScriptedPolicy:
    """A policy replaying ``replies`` in order per session (see ``ScriptedPolicy``)."""
    return ScriptedPolicy(replies, when_exhausted=when_exhausted)


class ToolExerciser:
    """Calls every advertised tool once with schema-valid arguments, then answers.

    By default all tools are called in one turn (parallel tool calls); with
    ``one_per_turn=True`` one tool per turn, in advertised order. A tool counts as
    called once an assistant message in the transcript requested it. When every
    tool has been called (or none is advertised) the policy answers ``answer``, or
    by default ``"Called N tool(s): a, b."``. Arguments come from each tool's
    ``function.parameters`` JSON Schema (see ``example_value``).
    """

    __slots__ = ("_answer", "_one_per_turn")

    def __init__(self, *, one_per_turn: bool = False, answer: str | None = None) -> None:
        self._one_per_turn = one_per_turn
        self._answer = answer

    def __call__(self, body: Mapping[str, object]) -> dict[str, object] | str:
        tools = _advertised_tools(body.get("tools"))
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        called = _requested_tool_names(messages)
        pending = [(name, params) for name, params in tools if name not in called]
        if not pending:
            if self._answer is not None:
                return self._answer
            names = ", ".join(name for name, _ in tools)
            return f"Called {len(tools)} tool(s): {names}." if tools else "No tools to call."
        if self._one_per_turn:
            pending = pending[:1]
        turn = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
        return {
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{turn}_{index}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps(_arguments(params), ensure_ascii=False),
                    },
                }
                for index, (name, params) in enumerate(pending)
            ],
        }

    def __repr__(self) -> str:
        answer = "" if self._answer is None else f", answer={self._answer!r}"
        return f"ToolExerciser(one_per_turn={self._one_per_turn!r}{answer})"


tool_exerciser = ToolExerciser()
"""Call every advertised tool once in one turn, then answer (see ``ToolExerciser``)."""


def _advertised_tools(tools: object) -> list[tuple[str, object]]:
    found: dict[str, object] = {}
    if not isinstance(tools, list):
        return []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            found.setdefault(function["name"], function.get("parameters"))
    return list(found.items())


def _arguments(parameters: object) -> dict[str, object]:
    """Schema-valid arguments; tool arguments are always a JSON object."""
    if isinstance(parameters, Mapping) and "type" not in parameters:
        parameters = {"type": "object", **parameters}
    value = example_value(parameters if parameters is not None else {"type": "object"})
    return value if isinstance(value, dict) else {}


def _requested_tool_names(messages: Sequence[object]) -> set[str]:
    names: set[str] = set()
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.add(function["name"])
    return names


def bind_policy(policy: Policy) -> BoundPolicy:
    """``policy`` as a two-argument callable ``(body, request)``."""
    if not callable(policy):
        raise TypeError("mock server policy must be callable")
    if _accepts_two_arguments(policy):
        return policy
    return lambda body, _request: policy(body)


def runs_inline(policy: Policy) -> bool:
    """Whether the server may call ``policy`` on its event loop: async policies and the
    cheap built-ins (``echo``, ``scripted``, ``tool_exerciser``). Any other sync policy may
    block (slow work, ``time.sleep``), so the server calls it in a worker thread."""
    if policy is echo or isinstance(policy, ScriptedPolicy | ToolExerciser):
        return True
    return inspect.iscoroutinefunction(policy) or inspect.iscoroutinefunction(type(policy).__call__)


def _accepts_two_arguments(policy: Policy) -> bool:
    try:
        signature = inspect.signature(policy)
    except (TypeError, ValueError):
        return False
    positional = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return True
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional += 1
    return positional >= 2


_BUILTIN_POLICIES: dict[str, Policy] = {"echo": echo, "tool_exerciser": tool_exerciser}


def load_policy(spec: str) -> Policy:
    """Resolve ``"echo"``, ``"tool_exerciser"``, ``"package.module:name"`` or ``"file.py:name"``.

    The named attribute must be a policy (a callable). Raises ``ValueError`` with a
    one-line message when the spec cannot be resolved.
    """
    if spec in _BUILTIN_POLICIES:
        return _BUILTIN_POLICIES[spec]
    module_name, colon, attribute = spec.rpartition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(
            f"mock policy {spec!r} must be 'echo', 'tool_exerciser', 'module:function' "
            "or 'path/to/file.py:function'"
        )
    try:
        if module_name.endswith(".py"):
            module = _import_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except Exception as error:  # the module's own code may raise anything while importing
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        raise ValueError(f"cannot import mock policy module {module_name!r}: {reason}") from error
    policy = module
    for part in attribute.split("."):
        try:
            policy = getattr(policy, part)
        except AttributeError:
            raise ValueError(f"mock policy module {module_name!r} has no {attribute!r}") from None
    if not callable(policy):
        raise ValueError(f"mock policy {spec!r} is not callable")
    # What a loaded policy returns is checked on every call, as for any policy.
    return cast(Policy, policy)


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ImportError(f"no such file: {path}")
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    registered = sys.modules.setdefault(name, module) is module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if registered:
            del sys.modules[name]
        raise
    return module
