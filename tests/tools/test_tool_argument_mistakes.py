"""Issue 28 kind 4: string annotations of types defined in a function resolve (or the
error names the fix); an argument a tool does not take is the model's mistake, answered
with a tool message, for ``@tool``, toolsets, MCP and hand-written ``run_tool`` alike; an
MCP ``tools/list`` whose cursor is empty or repeats ends the listing."""

from __future__ import annotations

import dataclasses
import enum
import logging
from pathlib import Path
from typing import Any

import cloudpickle
import pydantic
import pytest
from tests.tools.conftest import ToolsEnv, request, tool_messages
from tests.tools.mcp_support import raw_server

from benchmax.testing import MockModelServer, scripted
from benchmax.tools import FunctionTool, Toolset, tool


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# ---- types defined in the function that applies @tool ---------------------------------


def make_local_tools() -> tuple[FunctionTool[..., Any], type[Toolset]]:
    class Unit(enum.Enum):
        C = "C"
        F = "F"

    @dataclasses.dataclass
    class Place:
        city: str
        unit: Unit = Unit.C

    class Window(pydantic.BaseModel):
        days: int

    @tool
    def forecast(place: Place, window: Window, unit: Unit | None = None) -> str:
        """Forecast for a place."""
        chosen = unit or place.unit
        return f"{place.city}:{window.days}:{chosen.value}"

    class Weather(Toolset):
        @tool
        def today(self, place: Place) -> str:
            """Today's weather."""
            return f"today in {place.city} ({place.unit.value})"

    return forecast, Weather


async def test_types_defined_in_the_enclosing_function_resolve(
    mock_server: MockModelServer,
) -> None:
    forecast, weather = make_local_tools()
    properties = forecast.parameters["properties"]
    assert set(properties) == {"place", "window", "unit"}
    assert await forecast.invoke({"place": {"city": "Oslo"}, "window": {"days": 2}}) == "Oslo:2:C"
    # A bundle carries the local function by value: the resolved hints travel with it.
    copy = cloudpickle.loads(cloudpickle.dumps(forecast))
    assert copy.parameters == forecast.parameters
    result = await copy.invoke({"place": {"city": "Rome", "unit": "F"}, "window": {"days": 1}})
    assert result == "Rome:1:F"

    mock_server.policy = scripted([call("today", place={"city": "Oslo", "unit": "F"}), "done"])
    env = ToolsEnv(tools=[weather()])
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == ["today in Oslo (F)"]
    await env.aclose()


def test_a_type_no_scope_holds_names_the_fix() -> None:
    def define() -> None:
        @tool
        def late(item: Later) -> str:  # Later is defined after the tool, on purpose
            return str(item)

        class Later:
            pass

    with pytest.raises(TypeError) as caught:
        define()
    message = str(caught.value)
    assert "tool 'late'" in message and "Later" in message
    assert "module level" in message and "from __future__ import annotations" in message


# ---- arguments the tool does not take ---------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Counter(Toolset):
    @tool
    def bump(self, by: int) -> int:
        """Bump the counter."""
        return by


async def test_function_tools_and_toolsets_answer_an_unknown_argument(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(
        [call("add", a=1, b=2, c=3), call("bump", by=1, step=2), call("add", a=1, b=2), "done"]
    )
    env = ToolsEnv(tools=[add, Counter()])
    env.max_turns = 6
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    first, second, third = tool_messages(rollout)
    assert first.startswith("Invalid tool arguments") and "'c' was unexpected" in first
    assert second.startswith("Invalid tool arguments") and "'step' was unexpected" in second
    assert third == "3"
    await env.aclose()


LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


class NamedParameters(ToolsEnv):
    """A hand-written run_tool naming its parameters (no additionalProperties: false)."""

    max_turns = 6

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[str] = []

    async def list_tools(self) -> list[Any]:
        return [LOOKUP]

    async def run_tool(self, rollout_id: str, tool_name: str, city: str) -> Any:
        self.ran.append(city)
        return f"sunny in {city}"


class Dispatching(ToolsEnv):
    """A hand-written run_tool passing ``**tool_args`` on to its own functions."""

    max_turns = 6
    advertised: list[dict[str, Any]] = [LOOKUP]

    async def list_tools(self) -> list[Any]:
        return list(self.advertised)

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        return self._lookup(**tool_args)

    def _lookup(self, city: str) -> str:
        return f"rain in {city}"


async def test_a_hand_written_run_tool_with_named_parameters(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(
        [
            call("lookup", city="Oslo", country="NO"),
            call("lookup"),
            call("lookup", city="Oslo"),
            "ok",
        ]
    )
    env = NamedParameters()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == [
        "Invalid tool arguments: unexpected argument 'country'",
        "Invalid tool arguments: missing a required argument: 'city'",
        "sunny in Oslo",
    ]
    assert env.ran == ["Oslo"]  # never called with arguments it cannot take
    await env.aclose()


async def test_a_dispatching_run_tool_refusing_an_undeclared_argument(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(
        [call("lookup", city="Oslo", verbose=True), call("lookup", city="Oslo"), "ok"]
    )
    env = Dispatching()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == [
        "Invalid tool arguments: unexpected argument 'verbose'",
        "rain in Oslo",
    ]
    await env.aclose()


async def test_a_type_error_for_a_declared_argument_is_a_bug(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    class Buggy(Dispatching):
        advertised = [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    },
                },
            }
        ]

    class Crashing(Dispatching):
        def _lookup(self, city: str) -> str:
            return city + 1  # type: ignore[operator]  # a TypeError of the tool's own

    for env_type, arguments in ((Buggy, {"city": "Oslo", "days": 2}), (Crashing, {"city": "a"})):
        mock_server.policy = scripted([call("lookup", **arguments), "ok"])
        env = env_type()
        with caplog.at_level(logging.ERROR):
            rollout = await env.run_rollout(request(mock_server))
        assert rollout.termination_reason == "tool_error", env_type
        await env.aclose()


# ---- MCP: unknown arguments and broken pagination --------------------------------------


async def test_mcp_invalid_params_are_the_models_mistake(
    tmp_path: Path, mock_server: MockModelServer
) -> None:
    mock_server.policy = scripted(
        [call("echo", text="hi", loud=True), call("echo", text="hi"), "ok"]
    )
    env = ToolsEnv(tools=[raw_server(tmp_path, "reject-params")], tool_timeout=60.0)
    env.max_turns = 6
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    first, second = tool_messages(rollout)
    assert first.startswith("Invalid tool arguments:") and "unexpected argument" in first
    assert second == "hi"
    await env.aclose()


@pytest.mark.parametrize(
    ("behaviour", "names", "logged"),
    [
        ("cursor-empty", ["echo"], None),
        ("cursor-repeat", ["echo", "second"], "mcp.list_cursor_repeated"),
        # The cursor never advances: the same page again, which used to be a duplicate name.
        ("cursor-stuck", ["echo"], "mcp.list_cursor_repeated"),
    ],
)
async def test_an_empty_or_repeated_cursor_ends_the_listing(
    tmp_path: Path,
    mock_server: MockModelServer,
    caplog: pytest.LogCaptureFixture,
    behaviour: str,
    names: list[str],
    logged: str | None,
) -> None:
    mock_server.policy = scripted([call("echo", text="paged"), "ok"])
    env = ToolsEnv(tools=[raw_server(tmp_path, behaviour)], tool_timeout=60.0)
    with caplog.at_level(logging.WARNING, logger="benchmax.tools.mcp"):
        rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == ["paged"]
    sent = next(r for r in mock_server.requests if r.body.get("tools"))
    assert [t["function"]["name"] for t in sent.body["tools"]] == names
    messages = [record.getMessage() for record in caplog.records]
    if logged is not None:
        assert any(logged in message for message in messages)
    assert not any("declared twice" in message for message in messages)
    await env.aclose()
