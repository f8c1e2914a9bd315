"""Tool calls of one assistant turn: advertised names, argument checks, result content.

Arguments are checked against the advertised tool's ``parameters`` JSON Schema before
``run_tool`` (``jsonschema``, the schema's own draft, 2020-12 when it names none; formats
not asserted); a violation is answered with a tool message naming it
(``"Invalid tool arguments: <path>: <problem>"``) and the tool does not run. A schema
that is itself invalid is not used (logged once).

An argument the tool does not take is the model's mistake, answered with a tool message
(``"Invalid tool arguments: unexpected argument 'x'"``) while the rollout goes on, however
the tool is written: ``@tool`` functions and ``Toolset`` methods refuse unknown arguments
in their schema (``additionalProperties: false``); a hand-written ``run_tool`` that names
its parameters (``run_tool(self, rollout_id, tool_name, city)``) has the model's arguments
bound to its signature before it runs (``call_problem``); and a ``TypeError`` raised from
inside ``run_tool`` is the model's mistake only when it says ``unexpected keyword argument
'x'`` for an ``x`` the model passed and the advertised schema does not declare in its
``properties`` (``ArgumentChecks.refused_argument``). Any other ``TypeError`` (one naming
an argument the schema declares, so the tool claims to take it) is a bug in the tool and
ends the rollout as ``tool_error``.

A tool result becomes tool-message content (``tool_content``): a string as it is, ``None``
as ``""``, a list of content parts as it is, anything else as compact JSON, where values
JSON has no type for are encoded as follows: ``datetime``/``date``/``time`` -> ISO 8601
string; ``Decimal`` -> its exact decimal string (``"12.30"``), since a JSON number would
round it; ``Path`` and ``UUID`` -> string; ``Enum`` -> its value; ``set``/``frozenset`` ->
a list, sorted when its items are sortable; ``bytes`` -> UTF-8 text when it decodes,
else ``{"base64": "..."}``; dataclasses -> an object of their fields; pydantic models ->
``model_dump(mode="json")``; other mappings -> objects (keys as strings); anything else
-> ``str(value)``. A result JSON still cannot encode (a reference cycle) becomes
``str(result)``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import inspect
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import PurePath
from typing import Any

from benchmax.envs.errors import EnvError

__all__ = [
    "RESERVED_ARGUMENT_NAMES",
    "ArgumentChecks",
    "ToolTimedOut",
    "advertised_tool_names",
    "call_problem",
    "reserved_argument_message",
    "tool_content",
]

logger = logging.getLogger("benchmax.envs.base.env")

_MESSAGE_LIMIT = 300

RESERVED_ARGUMENT_NAMES = ("rollout_id", "tool_name")
"""``run_tool``'s own parameters: a model cannot pass arguments with these names."""

_CONTENT_PART_TYPES = ("text", "image_url")
_UNEXPECTED_KEYWORD = re.compile(r"got an unexpected keyword argument '([^']+)'")


class ToolTimedOut(EnvError):
    """A ``run_tool`` call outlived ``tool_timeout``."""

    def __init__(self, tool_name: str, seconds: float, *, message: str | None = None) -> None:
        super().__init__(message or f"tool {tool_name!r} exceeded tool_timeout of {seconds:g}s")


def advertised_tool_names(tools: Sequence[Any]) -> frozenset[str]:
    """Names of the function tools in ``tools`` (other entries are ignored)."""
    names: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return frozenset(names)


def reserved_argument_message(arguments: Mapping[str, Any]) -> str | None:
    """The tool message for arguments ``run_tool`` cannot take (its own parameter names)."""
    for name in RESERVED_ARGUMENT_NAMES:
        if name in arguments:
            return f"Tool argument name {name!r} is reserved."
    return None


def call_problem(
    run_tool: Callable[..., Any], rollout_id: str, arguments: Mapping[str, Any]
) -> str | None:
    """The tool message for arguments that a ``run_tool`` (the bound method) naming its
    parameters cannot take, or ``None``; one taking ``**tool_args`` accepts them all here."""
    function = getattr(run_tool, "__func__", run_tool)
    signature = _signature(function)
    if signature is None or any(
        parameter.kind is parameter.VAR_KEYWORD for parameter in signature.parameters.values()
    ):
        return None
    leading: tuple[Any, ...] = (rollout_id, "tool")
    if function is not run_tool:
        leading = (getattr(run_tool, "__self__", None), *leading)
    try:
        signature.bind(*leading, **arguments)
    except TypeError as error:
        match = _UNEXPECTED_KEYWORD.search(str(error))
        if match is not None:
            return _cut(f"Invalid tool arguments: unexpected argument {match.group(1)!r}")
        return _cut(f"Invalid tool arguments: {error}")
    return None


@lru_cache(maxsize=64)
def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _cut(message: str) -> str:
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 3] + "..."


class ArgumentChecks:
    """The advertised tools' ``parameters`` schemas, checking one call's arguments."""

    __slots__ = ("_schemas",)

    def __init__(self, tools: Sequence[Any]) -> None:
        self._schemas: dict[str, dict[str, Any]] = {}
        for tool in tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            name, schema = function.get("name"), function.get("parameters")
            if isinstance(name, str) and isinstance(schema, dict) and schema:
                self._schemas.setdefault(name, schema)

    def refused_argument(
        self, name: str, arguments: Mapping[str, Any], error: TypeError
    ) -> str | None:
        """The tool message when ``error`` (raised by ``run_tool``) refuses an argument the
        model passed that tool ``name``'s schema does not declare, else ``None`` (a bug)."""
        match = _UNEXPECTED_KEYWORD.search(str(error))
        if match is None or match.group(1) not in arguments:
            return None
        properties = self._schemas.get(name, {}).get("properties")
        if isinstance(properties, Mapping) and match.group(1) in properties:
            return None
        return _cut(f"Invalid tool arguments: unexpected argument {match.group(1)!r}")

    def problem(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """The tool message for arguments that violate tool ``name``'s schema, or ``None``."""
        schema = self._schemas.get(name)
        if schema is None:
            return None
        known = _BY_IDENTITY.get(id(schema))
        if known is not None and known[0] is schema:  # the same dict as last time
            validator = known[1]
        else:
            try:
                text = json.dumps(schema, sort_keys=True, default=str)
            except ValueError:  # a reference cycle: not a schema
                return None
            validator = _validator(text)
            if len(_BY_IDENTITY) >= _CACHE_SIZE:
                _BY_IDENTITY.clear()
            _BY_IDENTITY[id(schema)] = (schema, validator)
        if isinstance(validator, Exception):
            _warn_unusable(name, validator)
            return None
        import jsonschema.exceptions

        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
        except Exception as failure:  # an unresolvable $ref, a broken pattern, ...
            _warn_unusable(name, failure)
            return None
        if error is None:
            return None
        where = ".".join(str(part) for part in error.absolute_path)
        message = error.message
        if len(message) > _MESSAGE_LIMIT:
            message = message[: _MESSAGE_LIMIT - 3] + "..."
        return (
            f"Invalid tool arguments: {where}: {message}"
            if where
            else (f"Invalid tool arguments: {message}")
        )


_CACHE_SIZE = 512
_BY_IDENTITY: dict[int, tuple[dict[str, Any], Any]] = {}
"""Validators by schema object (the dict kept, so its id is not reused): tools listed
from the same dicts every rollout (``@tool`` specs, module-level constants) skip the
encoding of the schema to find its validator. A schema mutated in place after its first
use keeps its first validator."""


@lru_cache(maxsize=_CACHE_SIZE)
def _validator(schema_text: str) -> Any:
    """A validator for the schema (cached by its JSON text), or the ``SchemaError``
    saying why the schema is invalid."""
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        return error
    return cls(schema)


_warned: set[str] = set()


def _warn_unusable(name: object, error: BaseException) -> None:
    key = f"{name}:{type(error).__name__}"
    if key not in _warned:
        _warned.add(key)
        logger.warning(
            "base.rollout.tool_schema_unusable tool=%s: arguments not checked: %s",
            name,
            str(error).splitlines()[0][:_MESSAGE_LIMIT] if str(error) else type(error).__name__,
        )


def tool_content(result: Any) -> str | list[Any]:
    """A tool result as tool-message content: content parts pass through, strings stay,
    ``None`` is ``""``, the rest is JSON with the fallbacks in this module's docstring."""
    if (
        isinstance(result, list | tuple)
        and result
        and all(
            isinstance(part, Mapping) and part.get("type") in _CONTENT_PART_TYPES for part in result
        )
    ):
        return list(result)
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, bytes | bytearray | memoryview):
        encoded = _json_fallback(bytes(result))
        return encoded if isinstance(encoded, str) else _dumps(encoded)
    try:
        return _dumps(result)
    except (TypeError, ValueError, RecursionError):
        return str(result)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_fallback)


def _json_fallback(value: Any) -> Any:
    """A JSON-encodable stand-in for ``value`` (``json.dumps``'s ``default``)."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, PurePath | uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, set | frozenset):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and not isinstance(value, type):
        try:
            return model_dump(mode="json")
        except Exception:
            return str(value)
    if isinstance(value, Mapping):
        return {str(key): item for key, item in value.items()}
    return str(value)
