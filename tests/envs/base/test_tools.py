"""Tool dispatch, model-authored tool errors, tool failures, budgets and content."""

from __future__ import annotations

from typing import Any

import pytest
from tests.envs.base.support import (
    MULTIPLY_TOOL,
    AnswerEnv,
    ToolEnv,
    assert_env_record,
    make_request,
    tool_reply,
)

from benchmax.envs.shared_types import RolloutFailure
from benchmax.testing import MockModelServer, scripted


async def test_model_authored_tool_errors_become_tool_messages(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(
        [tool_reply(("divide", {"a": 1}), ("multiply", "{not json"), ("multiply", "[6,7]")), "42"]
    )
    env = ToolEnv()
    rollout = await env.run_rollout(make_request(mock_server))

    assert rollout.termination_reason == "finished"
    assert rollout.rewards == {"correct": 1.0}
    assert env.tool_calls == []
    tool_messages = [m for m in rollout.messages if m["role"] == "tool"]
    calls = rollout.messages[1]["tool_calls"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in calls]
    assert tool_messages[0]["content"] == "Unknown tool: divide"
    assert tool_messages[1]["content"].startswith("Invalid JSON tool arguments:")
    assert (
        tool_messages[1]["content"]
        == "Invalid JSON tool arguments: Expecting property name enclosed in double quotes"
    )
    assert tool_messages[2]["content"] == "Tool arguments must be a JSON object."
    assert list(tool_messages[0]) == ["role", "tool_call_id", "content"]
    await env.aclose()


async def test_empty_arguments_count_as_empty_object(mock_server: MockModelServer) -> None:
    class NoArgs(ToolEnv):
        async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
            self.tool_calls.append((rollout_id, tool_name, tool_args))
            return None

    mock_server.policy = scripted([tool_reply(("multiply", "")), "42"])
    env = NoArgs()
    env.tools = ({"type": "function", "function": {"name": "multiply"}},)
    rollout = await env.run_rollout(make_request(mock_server))
    assert env.tool_calls == [("rollout-0", "multiply", {})]
    assert rollout.messages[2]["content"] == ""
    await env.aclose()


class FailingToolEnv(ToolEnv):
    failure: BaseException = RuntimeError("calculator exploded")

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.tool_calls.append((rollout_id, tool_name, tool_args))
        if rollout_id == "rollout-0" and len(self.tool_calls) > 1:
            raise self.failure
        return {"value": 1}


async def test_tool_exception_is_tool_error_for_that_rollout_only(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    two_calls = tool_reply(
        ("multiply", {"left": 1, "right": 1}), ("multiply", {"left": 2, "right": 2})
    )
    mock_server.policy = scripted([two_calls, "42"])
    env = FailingToolEnv()
    outcomes = await env.run_group(
        [make_request(mock_server, "rollout-0"), make_request(mock_server, "rollout-1")]
    )
    assert outcomes["rollout-0"].termination_reason == "tool_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert outcomes["rollout-1"].termination_reason == "finished"
    assert_env_record(
        caplog,
        "base.rollout.tool_failed rollout_id=rollout-0 termination_reason=tool_error",
        exc_type=RuntimeError,
    )
    assert "calculator exploded" in caplog.text
    await env.aclose()


async def test_partial_tool_messages_are_dropped_on_failure(mock_server: MockModelServer) -> None:
    two_calls = tool_reply(
        ("multiply", {"left": 1, "right": 1}), ("multiply", {"left": 2, "right": 2})
    )
    mock_server.policy = scripted([two_calls])
    env = FailingToolEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "tool_error"
    assert [m["role"] for m in rollout.messages] == ["user", "assistant"]
    await env.aclose()


async def test_rollout_failure_from_tool_uses_its_reason(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    class SandboxEnv(FailingToolEnv):
        failure = RolloutFailure("sandbox_error", "sandbox crashed")

    mock_server.policy = scripted(
        [tool_reply(("multiply", {"left": 1, "right": 1}), ("multiply", {"left": 1, "right": 1}))]
    )
    env = SandboxEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "sandbox_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert_env_record(
        caplog,
        "base.rollout.tool_failed rollout_id=rollout-0 termination_reason=sandbox_error: "
        "sandbox crashed",
        exc_type=RolloutFailure,
    )
    await env.aclose()


async def test_zero_tool_budget_stops_before_any_tool(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7}))])
    env = ToolEnv(max_tool_calls=0)
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "tool_budget_exceeded"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert len(mock_server.requests) == 1
    assert env.tool_calls == []
    await env.aclose()


async def test_tool_budget_counts_every_requested_call(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(
        [
            tool_reply(("multiply", {"left": 1, "right": 2}), ("divide", {})),
            tool_reply(("multiply", {"left": 3, "right": 4})),
        ]
    )
    env = ToolEnv(max_tool_calls=2)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "tool_budget_exceeded"
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 1, "right": 2})]
    assert [m["role"] for m in rollout.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    await env.aclose()


class PartsEnv(ToolEnv):
    result: Any = None

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        return self.result


async def test_content_parts_are_forwarded_as_a_list(mock_server: MockModelServer) -> None:
    parts = (
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "a chart"},
    )
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 1, "right": 1})), "42"])
    env = PartsEnv()
    env.result = parts
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    second = mock_server.requests[1]
    assert second.body["messages"][2]["content"] == list(parts)
    assert rollout.messages[2]["content"] == list(parts)
    await env.aclose()


@pytest.mark.parametrize(
    ("result", "content"),
    [
        ({"value": 42}, '{"value":42}'),
        ((1.5, True), "[1.5,true]"),
        ([], "[]"),
        (3, "3"),
        ("plain", "plain"),
        (None, ""),
        ([{"type": "audio"}], '[{"type":"audio"}]'),
        ({"word": "café"}, '{"word":"café"}'),
        (float("nan"), "NaN"),
        (b"raw", "raw"),
    ],
)
async def test_tool_results_are_serialized(
    mock_server: MockModelServer, result: Any, content: str
) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    env = PartsEnv()
    env.result = result
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.messages[2]["content"] == content
    await env.aclose()


async def test_result_json_cannot_encode_falls_back_to_text(mock_server: MockModelServer) -> None:
    # issue 19 kind 4: an object JSON has no type for is its str(), not a tool_error.
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    env = PartsEnv()
    env.result = {"bad": Opaque()}
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert rollout.messages[2]["content"] == '{"bad":"opaque thing"}'
    await env.aclose()


class Opaque:
    def __str__(self) -> str:
        return "opaque thing"


async def test_custom_tool_call_is_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    # beyond.md §7: 0.2's TypeError "BaseEnv supports function tool calls only" (a
    # contract error) became model_error; a server's reply never raises out of run_group.
    mock_server.policy = scripted(
        [
            {
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "custom",
                        "function": {"name": "multiply", "arguments": "{}"},
                        "custom": {"name": "multiply", "input": "6*7"},
                    }
                ]
            }
        ]
    )
    env = ToolEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert env.tool_calls == []
    assert (
        "choices[0].message.tool_calls[0].type must be 'function' (a function tool call), "
        "got 'custom'" in caplog.text
    )
    await env.aclose()


async def test_advertised_names_ignore_malformed_entries(mock_server: MockModelServer) -> None:
    class OddTools(ToolEnv):
        tools = (
            "not a dict",
            {"function": "multiply"},
            {"type": "x", "function": {"name": 5}},
            MULTIPLY_TOOL,
        )

    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    env = OddTools()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert mock_server.requests[0].body["tools"] == list(OddTools.tools)
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    await env.aclose()


async def test_default_run_tool_rejects_unknown_tools(mock_server: MockModelServer) -> None:
    class AdvertisesOnly(AnswerEnv):
        max_turns = 2

        async def list_tools(self) -> list[Any]:
            return [MULTIPLY_TOOL]

    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7}))])
    env = AdvertisesOnly()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "tool_error"
    with pytest.raises(ValueError, match=r"^Unknown tool: multiply$"):
        await env.run_tool("r", "multiply")
    await env.aclose()


async def test_list_tools_runs_once_and_its_list_is_sent_every_turn(
    mock_server: MockModelServer,
) -> None:
    class CountingTools(ToolEnv):
        def __init__(self) -> None:
            super().__init__()
            self.list_calls = 0

        async def list_tools(self) -> list[Any]:
            self.list_calls += 1
            return [MULTIPLY_TOOL]

    call = ("multiply", {"left": 6, "right": 7})
    mock_server.policy = scripted([tool_reply(call), tool_reply(call), "42"])
    env = CountingTools()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert env.list_calls == 1
    assert [r.body["tools"] for r in mock_server.requests] == [[MULTIPLY_TOOL]] * 3
    await env.aclose()
