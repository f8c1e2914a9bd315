"""``@tool``: a typed Python function as an OpenAI function tool.

The JSON Schema of the tool's ``parameters`` is pydantic's JSON Schema of a model
built from the function's signature: one field per parameter, typed by its hint
(``Literal``, ``Annotated[..., Field(...)]``, dataclasses, pydantic models, ...),
required unless it has a default, described by ``Annotated[T, "text"]`` or by the
docstring's parameter section (Google, NumPy or reST style, read by
``docstring_parser``). Unknown arguments are refused (``additionalProperties: false``).
The model's arguments are validated and converted by that same model before the
function runs; a validation failure raises ``ToolError`` naming the argument.

String annotations (a module with ``from __future__ import annotations``) are evaluated
in the function's module and, as pydantic does for a model defined in a function, in the
local names of the scope that defined it when ``@tool`` ran there (the enclosing function,
or the function around a ``Toolset`` class body): types defined in that function before
the tool resolve. A type no scope holds is a ``TypeError`` naming the fix.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol, get_args, get_origin, overload

import docstring_parser
import pydantic
from pydantic.json_schema import GenerateJsonSchema

from benchmax.tools._errors import ToolError

__all__ = ["FunctionTool", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RESERVED = frozenset({"rollout_id", "tool_name"})  # BaseEnv.run_tool's own parameters
_MESSAGE_LIMIT = 300
_SHOWN_ERRORS = 3
_FRAME_SEARCH = 8
"""Frames above ``FunctionTool.__init__`` searched for the one that defined the function
(``@tool``, ``@tool(...)``, ``tool(f)`` and a direct ``FunctionTool(f)`` are within it)."""


class _UntitledSchema(GenerateJsonSchema):
    """pydantic's generator without the per-field ``title`` noise."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class _Compiled:
    """What a ``FunctionTool`` derives from its function: the argument model, the
    parameter names in call order, and the ``parameters`` JSON Schema."""

    __slots__ = ("fields", "model", "positional", "schema")

    def __init__(
        self,
        function: Callable[..., object],
        tool_name: str,
        method: bool,
        hints: dict[str, object],
        namespace: dict[str, object],
    ) -> None:
        signature = inspect.signature(function)
        parsed = docstring_parser.parse(function.__doc__ or "")
        docs = {param.arg_name: param.description for param in parsed.params}
        parameters = list(signature.parameters.values())
        if method:
            parameters = parameters[1:]
        _restore_dataclass_sentinels(_model_classes(hints, namespace))
        definitions: dict[str, Any] = {}  # pydantic.create_model's field keywords
        self.fields: list[tuple[str, str]] = []  # (field name, argument name)
        self.positional: set[str] = set()
        for index, parameter in enumerate(parameters):
            name = parameter.name
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                stars = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
                raise TypeError(
                    f"tool {tool_name!r}: {stars}{name} parameters cannot be tool arguments"
                )
            if name in _RESERVED:
                raise ValueError(
                    f"tool {tool_name!r}: parameter name {name!r} is reserved by BaseEnv.run_tool"
                )
            if name not in hints:
                raise TypeError(f"tool {tool_name!r}: parameter {name!r} needs a type hint")
            annotation = hints[name]
            options: dict[str, Any] = {"alias": name}  # pydantic.Field's keywords
            description = _annotated_text(annotation) or docs.get(name)
            if description:  # a description in Annotated[T, Field(...)] wins otherwise
                options["description"] = description
            if parameter.default is not parameter.empty:
                options["default"] = parameter.default
            default = pydantic.Field(**options)
            field = f"p{index}"
            definitions[field] = (annotation, default)
            self.fields.append((field, name))
            if parameter.kind is parameter.POSITIONAL_ONLY:
                self.positional.add(name)
        try:
            self.model: type[pydantic.BaseModel] = pydantic.create_model(
                f"{tool_name}_arguments",
                __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                **definitions,
            )
            if not self.model.__pydantic_complete__:
                # String annotations of classes whose module is gone (carried by value in
                # a bundle): resolve them with the classes found when the hints were.
                self.model.model_rebuild(_types_namespace=namespace)
            schema = self.model.model_json_schema(schema_generator=_UntitledSchema)
        except Exception as error:
            raise TypeError(
                f"tool {tool_name!r}: no JSON Schema for its parameters: {error}"
            ) from error
        schema.pop("title", None)
        schema.setdefault("properties", {})
        self.schema: dict[str, object] = schema


def _defining_scope(function: Callable[..., object]) -> dict[str, object]:
    """The local names of the scope executing the definition of ``function``, when that
    scope is a function (or a class body inside one) on the calling stack: the frame whose
    code holds the function's code object. Nearer scopes win; ``{}`` at module level.

    pydantic reads the parent frame's locals the same way for a model defined in a
    function (``parent_frame_namespace``); a snapshot is taken, so the frame is not kept.
    """
    code = getattr(function, "__code__", None)
    frame: types.FrameType | None = sys._getframe(1)
    for _ in range(_FRAME_SEARCH):
        if frame is None or code is None:
            return {}
        if code in frame.f_code.co_consts:
            break
        frame = frame.f_back
    else:
        return {}
    scopes: list[dict[str, object]] = []
    while frame is not None and frame.f_back is not None and frame.f_code.co_name != "<module>":
        local = dict(frame.f_locals)
        scopes.append(local)
        if "__qualname__" not in local or "__module__" not in local:
            break  # a function's scope; a class body's continues to the function around it
        frame = frame.f_back
    namespace: dict[str, object] = {}
    for scope in reversed(scopes):
        namespace.update(scope)
    return namespace


def _resolved_hints(
    function: Callable[..., object], tool_name: str, scope: Mapping[str, object]
) -> dict[str, object]:
    """The function's type hints as objects (string annotations evaluated in its module
    and in ``scope``, the local names of the scope that defined it)."""
    try:
        return typing.get_type_hints(function, localns=dict(scope), include_extras=True)
    except Exception as error:
        raise TypeError(
            f"tool {tool_name!r}: cannot resolve its type hints ({error}); define the types "
            "it uses at module level, or in the function that applies @tool before it does, "
            "or remove 'from __future__ import annotations' from its module"
        ) from error


def _model_classes(hints: Mapping[str, object], namespace: Mapping[str, object]) -> list[type]:
    """The classes reachable from ``hints`` (through type arguments, and the fields' hints
    of dataclasses and pydantic models, string annotations resolved with ``namespace``
    as well), builtins left out."""
    found: list[type] = []
    seen: set[int] = set()
    stack = list(hints.values())
    while stack:
        hint = stack.pop()
        if id(hint) in seen:
            continue
        seen.add(id(hint))
        stack.extend(get_args(hint))
        if not isinstance(hint, type) or hint.__module__ == "builtins":
            continue
        found.append(hint)
        if not (dataclasses.is_dataclass(hint) or issubclass(hint, pydantic.BaseModel)):
            continue
        try:
            nested = typing.get_type_hints(hint, localns=namespace, include_extras=True)
        except Exception:  # pydantic says what it cannot resolve
            nested = {}
        stack.extend(nested.values())
    return found


def _restore_dataclass_sentinels(classes: list[type]) -> None:
    """Make the dataclasses among ``classes`` use ``dataclasses.MISSING`` itself.

    A dataclass pickled by value (a bundle's project-local module) comes back with copies
    of the ``MISSING`` sentinel in its fields (cloudpickle issue #424), which pydantic then
    reads as "both default and default_factory given".
    """
    missing: object = dataclasses.MISSING
    for cls in classes:
        fields = getattr(cls, "__dataclass_fields__", None)
        if not isinstance(fields, dict):
            continue
        for field in fields.values():
            for name in ("default", "default_factory"):
                value: object = getattr(field, name)
                if type(value) is type(missing) and value is not missing:
                    setattr(field, name, missing)


def _annotated_text(annotation: object) -> str | None:
    """The first plain string in ``Annotated[T, ...]`` metadata (a description)."""
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:
            if isinstance(extra, str):
                return extra
    return None


def _description(function: Callable[..., object]) -> str:
    parsed = docstring_parser.parse(function.__doc__ or "")
    parts = [parsed.short_description, parsed.long_description]
    return "\n\n".join(part.strip() for part in parts if part and part.strip())


def _problem_text(error: pydantic.ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False)[:_SHOWN_ERRORS]:
        where = ".".join(str(part) for part in item["loc"])
        problems.append(f"{where}: {item['msg']}" if where else str(item["msg"]))
    more = error.error_count() - len(problems)
    text = "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 3] + "..."
    return f"Invalid tool arguments: {text}"


class FunctionTool[**P, R]:
    """A typed Python function offered to the model as a tool (made by ``@tool``).

    Calling it calls the function unchanged. ``name`` and ``description`` (the
    function's name and docstring unless given), ``parameters`` (the JSON Schema)
    and ``spec`` (the OpenAI function-tool dict) describe it; ``invoke`` runs it
    on the model's arguments. A function whose first parameter is named ``self`` or
    ``cls`` is a method (of a ``Toolset``): that parameter is not a tool argument.

    Pickles by its function (cloudpickle carries project-local functions by value);
    the derived schema is rebuilt after loading.
    """

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError("@tool needs a function")
        tool_name = function.__name__ if name is None else name
        if not isinstance(tool_name, str) or not _NAME.match(tool_name):
            raise ValueError(f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'")
        if description is not None and not isinstance(description, str):
            raise TypeError("tool description must be a string")
        self.function = function
        self.name = tool_name
        self.description = _description(function) if description is None else description
        self.is_async = inspect.iscoroutinefunction(function)
        first = next(iter(inspect.signature(function).parameters), None)
        self._method = first in ("self", "cls")  # confirmed when a class body names it
        self._compiled: _Compiled | None = None
        # Resolved now, while the defining module's names are all there: a function
        # pickled by value keeps only the globals its body uses, not its annotations', and
        # a class pickled by value loses its module (``_namespace``: the classes by name).
        self._hints: dict[str, object] | None = None
        self._namespace: dict[str, object] = {}
        # The defining scope's local names, for string annotations of types defined in a
        # function; dropped once the hints are resolved (its values need not pickle).
        self._scope: dict[str, object] | None = _defining_scope(function)
        if not self._method:
            self._compile()

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> FunctionTool[P, R]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., R]: ...
    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return self.function.__get__(instance, owner)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __getstate__(self) -> dict[str, object]:
        if self._hints is None:  # resolve before the defining module is left behind
            try:
                self._resolve()
            except TypeError:
                pass
        state = dict(vars(self))
        state["_scope"] = None
        state["_compiled"] = None  # the pydantic model is rebuilt from the hints, not pickled
        return state

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r})"

    def _resolve(self) -> None:
        scope = self._scope or {}
        hints = _resolved_hints(self.function, self.name, scope)
        local_types = {key: value for key, value in scope.items() if isinstance(value, type)}
        self._namespace = {cls.__name__: cls for cls in _model_classes(hints, local_types)}
        self._hints = hints
        self._scope = None

    def _compile(self) -> _Compiled:
        compiled = self._compiled
        if compiled is None:
            if self._hints is None:
                self._resolve()
            assert self._hints is not None
            compiled = _Compiled(
                self.function, self.name, self._method, self._hints, self._namespace
            )
            self._compiled = compiled
        return compiled

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (an object schema); raises ``TypeError``
        when a parameter's type has no JSON Schema. Typed ``Any`` inside: callers index
        into it (``spec["function"]["parameters"]["required"]``)."""
        return self._compile().schema

    @property
    def spec(self) -> dict[str, Any]:
        """``{"type": "function", "function": {"name", "description", "parameters"}}``
        (``description`` left out when empty); a new dict each time."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}

    async def invoke(self, arguments: Mapping[str, object], *, instance: object = None) -> object:
        """Validate and convert the model's ``arguments``, then run the function (a sync
        one in a worker thread; ``instance`` is ``self`` for a method) and return its result.

        Raises ``ToolError("Invalid tool arguments: <argument>: <problem>")`` when the
        arguments do not fit the signature; the function's own exceptions propagate.
        """
        compiled = self._compile()
        try:
            validated = compiled.model.model_validate(dict(arguments))
        except pydantic.ValidationError as error:
            raise ToolError(_problem_text(error)) from None
        args: list[object] = [] if instance is None else [instance]
        kwargs: dict[str, object] = {}
        for field, name in compiled.fields:
            value = getattr(validated, field)
            if name in compiled.positional:
                args.append(value)
            else:
                kwargs[name] = value
        function: Callable[..., Any] = self.function
        if self.is_async:
            return await function(*args, **kwargs)
        result = await asyncio.to_thread(function, *args, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


class _ToolDecorator(Protocol):
    def __call__[**P, R](self, function: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool[**P, R](function: Callable[P, R], /) -> FunctionTool[P, R]: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> _ToolDecorator: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool[..., Any] | _ToolDecorator:
    """Make a typed function (sync or async) a tool: ``@tool`` or
    ``@tool(name=..., description=...)``.

    Raises ``TypeError`` for a parameter without a type hint, a ``*args``/``**kwargs``
    parameter or a type pydantic cannot describe, and ``ValueError`` for an invalid
    name or a parameter named ``rollout_id`` or ``tool_name`` (``run_tool``'s own).
    """
    if function is not None:
        return FunctionTool(function, name=name, description=description)

    def decorate[**P, R](inner: Callable[P, R], /) -> FunctionTool[P, R]:
        return FunctionTool(inner, name=name, description=description)

    return decorate
