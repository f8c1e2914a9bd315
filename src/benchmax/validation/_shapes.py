"""Shape checks for what BaseEnv sends a model: prompt messages and function tools.

Each function returns the problems it found as sentences naming the offending path
(``prompt_messages[1].content[0]``); an empty list means the value is well formed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["prompt_message_problems", "tool_problems"]

_ROLES = ("system", "developer", "user", "assistant", "tool")
# OpenAI function names: letters, digits, underscores and dashes, at most 64 characters.
_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PART_FIELDS = {"text": "text", "image_url": "image_url", "input_audio": "input_audio"}


def prompt_message_problems(payload: object) -> list[str]:
    """Problems with a BaseEnv payload's ``prompt_messages`` (roles and content shapes)."""
    if not isinstance(payload, Mapping):
        return [f"the payload is a {type(payload).__name__}, not a JSON object"]
    messages = payload.get("prompt_messages")
    if not isinstance(messages, list) or not messages:
        return ["prompt_messages must be a non-empty list of chat messages"]
    problems: list[str] = []
    for index, message in enumerate(messages):
        where = f"prompt_messages[{index}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where} is a {type(message).__name__}, not an object")
            continue
        role = message.get("role")
        if role not in _ROLES:
            problems.append(f"{where}.role is {role!r}; use one of {', '.join(_ROLES)}")
            continue
        problems.extend(_content_problems(where, role, message))
    return problems


def _content_problems(where: str, role: str, message: Mapping[str, object]) -> list[str]:
    content = message.get("content")
    tool_calls = message.get("tool_calls")
    problems: list[str] = []
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        problems.append(f"{where} (a tool message) needs a string tool_call_id")
    if tool_calls is not None:
        if role != "assistant":
            problems.append(f"{where} has tool_calls but only assistant messages may")
        elif not isinstance(tool_calls, list) or not all(
            isinstance(call, Mapping) and isinstance(call.get("function"), Mapping)
            for call in tool_calls
        ):
            problems.append(f"{where}.tool_calls must be a list of {{'function': {{...}}}}")
    if content is None:
        if role != "assistant" or not tool_calls:
            problems.append(f"{where}.content is missing (only assistant tool calls may omit it)")
        return problems
    if isinstance(content, str):
        return problems
    if not isinstance(content, list):
        problems.append(
            f"{where}.content is a {type(content).__name__}; use a string or a list of parts"
        )
        return problems
    for part_index, part in enumerate(content):
        part_where = f"{where}.content[{part_index}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            problems.append(f"{part_where} must be an object with a string 'type'")
            continue
        field = _PART_FIELDS.get(part["type"])
        if field is None:
            continue  # other part types are the server's business
        if field == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{part_where} is a text part without a string 'text'")
        elif field != "text" and not isinstance(part.get(field), Mapping):
            problems.append(f"{part_where} is a {field} part without an object {field!r}")
    return problems


def tool_problems(tools: object) -> list[str]:
    """Problems with ``list_tools()``'s result as OpenAI function tools.

    Each tool must be ``{"type": "function", "function": {"name", "description"?,
    "parameters"?}}`` with a unique valid name; ``parameters`` must be a JSON Schema
    (checked against its metaschema with ``jsonschema``) describing an object.
    """
    if not isinstance(tools, list):
        return [f"list_tools returned a {type(tools).__name__}; return a list of tool dicts"]
    problems: list[str] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            problems.append(f"{where} is a {type(tool).__name__}, not an object")
            continue
        if tool.get("type") != "function":
            problems.append(f"{where}.type is {tool.get('type')!r}; it must be 'function'")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            problems.append(f"{where}.function must be an object with a name and parameters")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
            problems.append(
                f"{where}.function.name {name!r} must be 1-64 letters, digits, '_' or '-'"
            )
        elif name in seen:
            problems.append(f"{where}.function.name {name!r} is advertised twice")
        else:
            seen.add(name)
            where = f"tool {name!r}"
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            problems.append(f"{where}: description must be a string")
        if "parameters" in function:
            problems.extend(_schema_problems(where, function["parameters"]))
    return problems


def _schema_problems(where: str, schema: object) -> list[str]:
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators

    # A dict, as JSON decodes to: jsonschema's metaschema check calls any other
    # mapping "not of type 'object'", and the request encoder refuses it.
    if not isinstance(schema, dict):
        return [f"{where}: parameters is a {type(schema).__name__}; use a JSON Schema object"]
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        path = "/".join(str(part) for part in error.absolute_path) or "(root)"
        return [f"{where}: parameters is not a valid JSON Schema at {path}: {error.message}"]
    if schema.get("type") != "object":
        return [f"{where}: parameters must describe an object ('type': 'object')"]
    return []
