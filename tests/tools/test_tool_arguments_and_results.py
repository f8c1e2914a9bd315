"""Issue 19 kind 4, for every tool (hand-written ones too): arguments are checked against
the advertised ``parameters`` schema before ``run_tool``, and non-string results are
encoded to JSON with documented fallbacks instead of ending as ``tool_error``."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from pathlib import Path
from typing import Any

import pydantic
import pytest
from tests.tools.conftest import ToolsEnv, request, tool_messages

from benchmax.testing import MockModelServer, scripted

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["C", "F"]},
                "days": {"type": "integer", "minimum": 1},
                "filters": {
                    "type": "object",
                    "properties": {"rain": {"type": "boolean"}},
                    "additionalProperties": False,
                },
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


class HandWritten(ToolsEnv):
    """A 0.2-style environment: its own list_tools and run_tool."""

    max_turns = 8
    advertised: list[dict[str, Any]] = [LOOKUP]
    result: Any = "sunny"

    def __init__(self, **limits: Any) -> None:
        super().__init__(**limits)
        self.ran: list[dict[str, Any]] = []

    async def list_tools(self) -> list[Any]:
        return list(self.advertised)

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.ran.append(tool_args)
        return self.result


def call(arguments: Any, name: str = "lookup") -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_arguments_violating_the_schema_are_answered_and_not_run(
    mock_server: MockModelServer,
) -> None:
    bad = [
        {"unit": "C"},
        {"city": 7},
        {"city": "Oslo", "unit": "K"},
        {"city": "Oslo", "country": "NO"},
        {"city": "Oslo", "days": 0},
        {"city": "Oslo", "filters": {"rain": "yes"}},
    ]
    mock_server.policy = scripted([*(call(a) for a in bad), call({"city": "Oslo"}), "done"])
    env = HandWritten()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == [
        "Invalid tool arguments: 'city' is a required property",
        "Invalid tool arguments: city: 7 is not of type 'string'",
        "Invalid tool arguments: unit: 'K' is not one of ['C', 'F']",
        "Invalid tool arguments: Additional properties are not allowed ('country' was unexpected)",
        "Invalid tool arguments: days: 0 is less than the minimum of 1",
        "Invalid tool arguments: filters.rain: 'yes' is not of type 'boolean'",
        "sunny",
    ]
    assert env.ran == [{"city": "Oslo"}]
    await env.aclose()


async def test_invalid_arguments_count_toward_max_tool_calls(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([call({}), call({}), "done"])
    env = HandWritten(max_tool_calls=1)
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "tool_budget_exceeded"
    assert env.ran == []
    await env.aclose()


async def test_a_long_offending_value_is_cut_in_the_message(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([call({"city": "Oslo", "unit": "x" * 5000}), "done"])
    env = HandWritten()
    rollout = await env.run_rollout(request(mock_server))
    (message,) = tool_messages(rollout)
    assert message.startswith("Invalid tool arguments: unit: 'xxx")
    assert message.endswith("...") and len(message) < 400
    await env.aclose()


async def test_tools_without_a_usable_schema_are_not_checked(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    class Loose(HandWritten):
        advertised = [
            {"type": "function", "function": {"name": "free"}},
            {
                "type": "function",
                "function": {"name": "broken", "parameters": {"type": "object", "minLength": -1}},
            },
        ]

    mock_server.policy = scripted([call({"any": 1}, "free"), call({"any": 2}, "broken"), "done"])
    env = Loose()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert env.ran == [{"any": 1}, {"any": 2}]
    assert "tool_schema_unusable tool=broken" in caplog.text
    await env.aclose()


@dataclasses.dataclass
class Reading:
    city: str
    at: datetime.datetime
    tags: frozenset[str]


class Forecast(pydantic.BaseModel):
    city: str
    high: decimal.Decimal
    when: datetime.date


class Colour(enum.Enum):
    RED = "red"


WHEN = datetime.datetime(2026, 12, 1, 15, 30, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("result", "content"),
    [
        (WHEN, '"2026-12-01T15:30:00+00:00"'),
        ({"on": datetime.date(2026, 1, 2)}, '{"on":"2026-01-02"}'),
        ({"t": datetime.time(9, 5)}, '{"t":"09:05:00"}'),
        (decimal.Decimal("12.30"), '"12.30"'),
        ([Path("/tmp/a.txt")], '["/tmp/a.txt"]'),
        ({"ids": {3, 1, 2}}, '{"ids":[1,2,3]}'),
        ({"mixed": {1, "a"}}, None),  # unsortable: some order
        (b"caf\xc3\xa9", "café"),
        ({"blob": b"\xff\x00"}, '{"blob":{"base64":"/wA="}}'),
        (
            Reading("Oslo", WHEN, frozenset({"b", "a"})),
            '{"city":"Oslo","at":"2026-12-01T15:30:00+00:00","tags":["a","b"]}',
        ),
        (
            Forecast(city="Oslo", high=decimal.Decimal("3.5"), when=datetime.date(2026, 1, 2)),
            '{"city":"Oslo","high":"3.5","when":"2026-01-02"}',
        ),
        ({"colour": Colour.RED}, '{"colour":"red"}'),
        ({"id": uuid.UUID(int=1)}, '{"id":"00000000-0000-0000-0000-000000000001"}'),
        (True, "true"),
    ],
)
async def test_non_string_results_are_encoded_to_json(
    mock_server: MockModelServer, result: Any, content: str | None
) -> None:
    mock_server.policy = scripted([call({"city": "Oslo"}), "done"])
    env = HandWritten()
    env.result = result
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    (message,) = tool_messages(rollout)
    if content is None:
        assert message in ('{"mixed":[1,"a"]}', '{"mixed":["a",1]}')
    else:
        assert message == content
    await env.aclose()


async def test_a_result_json_cannot_encode_becomes_its_text(mock_server: MockModelServer) -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    mock_server.policy = scripted([call({"city": "Oslo"}), "done"])
    env = HandWritten()
    env.result = looped
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == ["{'self': {...}}"]
    await env.aclose()
