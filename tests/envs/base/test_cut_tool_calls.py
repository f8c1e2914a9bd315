"""beyond.md §9 "Output cut inside a tool call": a reply of the output-limit family that
carries tool calls (complete, or truncated JSON arguments) ends as ``output_exceeded``;
its calls are never run and never answered with an error tool message."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.envs.base.support import ToolEnv, make_request, tool_reply

from benchmax.testing import MockModelServer, scripted


@pytest.mark.parametrize("finish_reason", ["length", "max_tokens"])
@pytest.mark.parametrize(
    "arguments",
    ['{"left": 6, "right": 7}', '{"left": 6, "ri', '{"left": 6, "right": 7'],
    ids=["complete", "truncated-key", "truncated-object"],
)
async def test_a_tool_call_cut_by_the_output_limit_is_output_exceeded_and_not_run(
    mock_server: MockModelServer,
    caplog: pytest.LogCaptureFixture,
    finish_reason: str,
    arguments: str,
) -> None:
    cut = {**tool_reply(("multiply", arguments)), "finish_reason": finish_reason}
    mock_server.policy = scripted([cut, "The answer is 42"])
    env = ToolEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "output_exceeded"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert env.tool_calls == []  # never run
    assert env.reward_calls == []
    assert len(mock_server.requests) == 1  # the rollout did not go on
    rollout = await env.run_rollout(make_request(mock_server, "rollout-1"))
    roles = [m["role"] for m in rollout.messages]
    assert roles == ["user", "assistant"]  # no error tool message
    assert rollout.messages[-1]["tool_calls"][0]["function"]["arguments"] == arguments
    warned = [r for r in caplog.records if "base.rollout.finish_reason" in r.getMessage()]
    assert warned and warned[0].levelno == logging.WARNING
    assert "termination_reason=output_exceeded" in warned[0].getMessage()
    await env.aclose()


async def test_truncated_arguments_outside_the_output_limit_are_still_answered(
    mock_server: MockModelServer,
) -> None:
    """0.2 behaviour kept: a reply that was not cut gets the error tool message and goes on."""
    bad: dict[str, Any] = {**tool_reply(("multiply", '{"left": 6')), "finish_reason": "tool_calls"}
    mock_server.policy = scripted([bad, "42"])
    env = ToolEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert rollout.messages[2]["role"] == "tool"
    assert rollout.messages[2]["content"].startswith("Invalid JSON tool arguments")
    await env.aclose()
