"""The shape of JSON values, named once for every layer.

:data:`JSONValue` is what :func:`json.loads` can return; :data:`JSONObject` is a decoded
JSON object (a request body, a results line, a tool's arguments). Code that only reads a
value it did not build takes ``Mapping[str, object]`` instead, so callers may pass any
mapping.
"""

type JSONValue = str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None
type JSONObject = dict[str, JSONValue]

__all__ = ["JSONObject", "JSONValue"]
