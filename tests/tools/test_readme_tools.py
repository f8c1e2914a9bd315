"""The README's "Tools from typed functions" examples work as written (``forecast`` in a
``WeatherEnv``, the ``Database`` toolset in a ``ShopEnv``), against the mock model server."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Literal

from tests.tools.conftest import ToolsEnv, request, tool_messages

from benchmax.testing import MockModelServer, scripted
from benchmax.tools import ToolError, Toolset, tool

FORECASTS = {"Oslo": [3, 4, 2]}


@tool
def forecast(
    city: Annotated[str, "city name, e.g. Oslo"],
    unit: Literal["C", "F"] = "C",
    days: int = 1,
) -> dict[str, Any]:
    """Weather forecast for a city.

    Args:
        days: how many days ahead, 1-7.
    """
    if city not in FORECASTS:
        raise ToolError(f"no forecast for {city!r}")  # the model reads this and goes on
    return {"city": city, "unit": unit, "highs": FORECASTS[city][:days]}


class WeatherEnv(ToolsEnv):
    tools = [forecast]


class Database(Toolset):
    def __init__(self, schema_sql: str) -> None:
        self.schema_sql = schema_sql

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.executescript(self.schema_sql)
        self.db.executemany("INSERT INTO items VALUES (?, ?)", example.payload["items"])
        try:
            yield
        finally:
            self.db.close()

    @tool
    def query(self, sql: str) -> list[Any]:
        """Run a read-only SQL query."""
        return self.db.execute(sql).fetchall()


class ShopEnv(ToolsEnv):
    tools = [Database("CREATE TABLE items (name TEXT, price REAL)")]


def call(name: str, arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_the_forecast_example(mock_server: MockModelServer) -> None:
    spec = forecast.spec["function"]
    assert spec["description"] == "Weather forecast for a city."
    assert spec["parameters"]["properties"]["days"]["description"] == "how many days ahead, 1-7."
    mock_server.policy = scripted(
        [
            call("forecast", {"city": "Oslo", "days": 2}),
            call("forecast", {"city": "Bergen"}),
            call("forecast", {"city": "Oslo", "days": "two"}),
            "done",
        ]
    )
    env = WeatherEnv()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == [
        '{"city":"Oslo","unit":"C","highs":[3,4]}',
        "no forecast for 'Bergen'",
        "Invalid tool arguments: days: 'two' is not of type 'integer'",
    ]
    await env.aclose()


async def test_the_database_toolset_example(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([call("query", {"sql": "SELECT * FROM items"}), "done"])
    env = ShopEnv()
    rows = {"items": [["pen", 1.5], ["ink", 4.0]]}
    outcomes = await env.run_group(
        [request(mock_server, "a", rows), request(mock_server, "b", {"items": [["cap", 2.0]]})]
    )
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    results = {
        rid: [
            m["content"]
            for m in mock_server.requests_for(rid)[-1].body["messages"]
            if m["role"] == "tool"
        ]
        for rid in ("a", "b")
    }
    assert results == {"a": ['[["pen",1.5],["ink",4.0]]'], "b": ['[["cap",2.0]]']}
    await env.aclose()


@tool
def remind(when: datetime, days: int = 1) -> str:
    """Set a reminder."""
    return f"{type(when).__name__} {when.isoformat()} +{days}"


class ReminderEnv(ToolsEnv):
    tools = [remind]


async def test_the_schema_check_is_strict_and_pydantic_converts_what_it_lets_through(
    mock_server: MockModelServer,
) -> None:
    # README: a "7" for an int is refused by the schema check; an ISO 8601 string (the
    # schema's "date-time" format is not asserted) reaches the function as a datetime.
    mock_server.policy = scripted(
        [
            call("remind", {"when": "2026-12-01T10:00:00", "days": "7"}),
            call("remind", {"when": "2026-12-01T10:00:00", "days": 7}),
            call("remind", {"when": "next tuesday"}),
            "done",
        ]
    )
    env = ReminderEnv()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    messages = tool_messages(rollout)
    assert messages[:2] == [
        "Invalid tool arguments: days: '7' is not of type 'integer'",
        "datetime 2026-12-01T10:00:00 +7",
    ]
    assert messages[2].startswith("Invalid tool arguments: when: Input should be a valid datetime")
    await env.aclose()
