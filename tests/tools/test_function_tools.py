"""``@tool``: JSON Schema from the signature, argument validation and conversion, calls."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import threading
from typing import Annotated, Any, Literal

import cloudpickle
import pydantic
import pytest

from benchmax.tools import FunctionTool, ToolError, Toolset, tool


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Window(pydantic.BaseModel):
    start: int
    end: int = pydantic.Field(description="last line, inclusive")


@tool
def search(
    query: Annotated[str, "text to look for"],
    mode: Literal["fast", "deep"] = "fast",
    limit: Annotated[int, pydantic.Field(ge=1, le=50, description="most results")] = 5,
    near: Point | None = None,
    window: Window | None = None,
) -> dict[str, Any]:
    """Search the corpus.

    Results are ranked by relevance.

    Args:
        query: overridden by the Annotated text.
        mode: how hard to look.
    """
    return {"query": query, "mode": mode, "limit": limit, "near": near, "window": window}


def test_schema_comes_from_the_signature_hints_and_docstring() -> None:
    spec = search.spec
    assert spec["type"] == "function"
    function = spec["function"]
    assert function["name"] == "search"
    assert function["description"] == "Search the corpus.\n\nResults are ranked by relevance."
    schema = function["parameters"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    properties = schema["properties"]
    assert list(properties) == ["query", "mode", "limit", "near", "window"]
    assert properties["query"] == {"type": "string", "description": "text to look for"}
    assert properties["mode"] == {
        "type": "string",
        "enum": ["fast", "deep"],
        "default": "fast",
        "description": "how hard to look.",
    }
    assert properties["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 50,
        "default": 5,
        "description": "most results",
    }
    point = schema["$defs"]["Point"]
    assert point["properties"] == {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}}
    assert point["required"] == ["x"]
    window = schema["$defs"]["Window"]
    assert window["properties"]["end"]["description"] == "last line, inclusive"
    assert {"$ref": "#/$defs/Window"} in properties["window"]["anyOf"]
    assert "title" not in schema and "title" not in properties["query"]


def test_numpy_and_rest_docstrings_describe_parameters() -> None:
    @tool
    def numpy_style(path: str, depth: int = 1) -> str:
        """List a directory.

        Parameters
        ----------
        path : str
            directory to list
        depth : int
            how deep to go
        """
        return path

    @tool(name="rest-style", description="Own description.")
    async def rest_style(path: str) -> str:
        """Ignored.

        :param path: file to read
        """
        return path

    numpy_properties = numpy_style.parameters["properties"]
    assert numpy_properties["path"]["description"] == "directory to list"
    assert numpy_properties["depth"]["description"] == "how deep to go"
    assert numpy_style.description == "List a directory."
    assert rest_style.name == "rest-style"
    assert rest_style.spec["function"]["description"] == "Own description."
    assert rest_style.parameters["properties"]["path"]["description"] == "file to read"


def test_a_tool_without_docstring_or_parameters_has_an_empty_object_schema() -> None:
    @tool
    def now() -> str:
        return "noon"

    assert now.spec == {
        "type": "function",
        "function": {
            "name": "now",
            "parameters": {"additionalProperties": False, "properties": {}, "type": "object"},
        },
    }


async def test_invoke_converts_arguments_to_the_hinted_types() -> None:
    result = await search.invoke(
        {"query": "q", "limit": "7", "near": {"x": 3}, "window": {"start": 1, "end": 2}}
    )
    assert result == {
        "query": "q",
        "mode": "fast",
        "limit": 7,
        "near": Point(3, 0),
        "window": Window(start=1, end=2),
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Invalid tool arguments: query: Field required"),
        (
            {"query": "q", "mode": "slow"},
            "Invalid tool arguments: mode: Input should be 'fast' or 'deep'",
        ),
        (
            {"query": "q", "limit": 99},
            "Invalid tool arguments: limit: Input should be less than or equal to 50",
        ),
        (
            {"query": "q", "near": {"x": "far"}},
            "Invalid tool arguments: near.x: Input should be a valid integer, unable to parse "
            "string as an integer",
        ),
        (
            {"query": "q", "colour": "red"},
            "Invalid tool arguments: colour: Extra inputs are not permitted",
        ),
    ],
)
async def test_invalid_arguments_raise_tool_error_naming_the_argument(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError) as raised:
        await search.invoke(arguments)
    assert str(raised.value) == message


async def test_many_invalid_arguments_are_summarized() -> None:
    @tool
    def four(a: int, b: int, c: int, d: int) -> int:
        return a

    with pytest.raises(ToolError, match=r"^Invalid tool arguments: a: .*; c: .* \(and 1 more\)$"):
        await four.invoke({})


async def test_sync_tools_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    loop_thread = threading.get_ident()

    @tool
    def blocking() -> int:
        return threading.get_ident()

    @tool
    async def cooperative() -> int:
        await asyncio.sleep(0)
        return threading.get_ident()

    assert await blocking.invoke({}) != loop_thread
    assert await cooperative.invoke({}) == loop_thread
    assert blocking.is_async is False and cooperative.is_async is True


async def test_a_decorated_function_is_still_callable_directly() -> None:
    assert search("x")["query"] == "x"

    @tool
    async def double(n: int) -> int:
        return 2 * n

    assert await double(4) == 8


async def test_positional_only_parameters_are_passed_by_position() -> None:
    @tool
    def subtract(a: int, b: int, /, scale: int = 1) -> int:
        return (a - b) * scale

    assert await subtract.invoke({"a": 5, "b": 3, "scale": 2}) == 4


def test_declaration_errors_are_raised_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"parameter 'x' needs a type hint"):

        @tool
        def no_hint(x) -> None:  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(TypeError, match=r"\*args parameters cannot be tool arguments"):

        @tool
        def star(*args: int) -> None:
            pass

    with pytest.raises(TypeError, match=r"'double_star': \*\*options parameters cannot be"):

        @tool
        def double_star(**options: int) -> None:
            pass

    with pytest.raises(ValueError, match=r"parameter name 'rollout_id' is reserved"):

        @tool
        def reserved(rollout_id: str) -> None:
            pass

    with pytest.raises(ValueError, match=r"tool name 'has space' must be 1-64"):
        tool(name="has space")(lambda: None)

    with pytest.raises(TypeError, match=r"no JSON Schema for its parameters"):

        @tool
        def opaque(lock: threading.Lock) -> None:  # type: ignore[valid-type]
            pass


def test_function_tools_pickle_without_their_compiled_model() -> None:
    loaded = pickle.loads(cloudpickle.dumps(search))
    assert isinstance(loaded, FunctionTool)
    assert loaded.spec == search.spec
    assert asyncio.run(loaded.invoke({"query": "q"}))["limit"] == 5


class Counter(Toolset):
    step = 1

    @tool
    def bump(self, by: int = 1) -> int:
        """Add to the counter.

        Args:
            by: how much to add.
        """
        self.total = getattr(self, "total", 0) + by * self.step
        return self.total

    @tool(name="read_total")
    async def total_now(self) -> int:
        return getattr(self, "total", 0)

    def helper(self) -> None:  # not a tool
        pass


def test_toolset_methods_skip_self_and_are_listed_in_order() -> None:
    tools = Counter.function_tools()
    assert [t.name for t in tools] == ["bump", "read_total"]
    bump = tools[0].parameters
    assert list(bump["properties"]) == ["by"]
    assert bump["properties"]["by"]["description"] == "how much to add."
    assert Counter.tool_attributes == ("bump", "total_now")


async def test_toolset_copies_keep_their_own_state() -> None:
    counter = Counter()
    first, second = counter.for_rollout("a"), counter.for_rollout("b")
    bump = Counter.function_tools()[0]
    assert await bump.invoke({"by": 2}, instance=first) == 2
    assert await bump.invoke({}, instance=first) == 3
    assert await bump.invoke({}, instance=second) == 1
    assert (first.rollout_id, second.rollout_id, counter.rollout_id) == ("a", "b", None)
    assert not hasattr(counter, "total")
    assert first.bump(10) == 13  # a method called directly stays a plain method


def test_a_subclass_inherits_and_can_hide_tools() -> None:
    class NoReading(Counter):
        total_now = None  # type: ignore[assignment]

        @tool
        def reset(self) -> None:
            self.total = 0

    assert [t.name for t in NoReading.function_tools()] == ["bump", "reset"]
