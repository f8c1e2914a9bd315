"""How failing model calls end a rollout (fault injection over real HTTP)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from tests.envs.base.support import (
    PAYLOAD,
    AnswerEnv,
    ToolEnv,
    fixed_response_server,
    make_request,
    tool_reply,
)

from benchmax.auth import StaticBearerAuth
from benchmax.envs.shared_types import Example, RolloutRequest
from benchmax.testing import Fault, MockModelServer, scripted

ENV_LOGGER = "benchmax.envs.base.env"


def env_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == ENV_LOGGER]


async def test_context_budget_400_after_tool_turn_is_context_exceeded(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    env = ToolEnv()

    async def then_fail(body: dict) -> object:
        if len(body["messages"]) > 1:
            return Fault.status(400, error_code="context_budget_exceeded", message="too long")
        return tool_reply(("multiply", '{"left": 6, "right": 7}'))

    mock_server.policy = then_fail
    outcomes = await env.run_group([make_request(mock_server)])

    assert outcomes["rollout-0"].termination_reason == "context_exceeded"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert len(mock_server.requests) == 2
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    assert env.reward_calls == []
    (record,) = env_records(caplog)
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "base.rollout.model_failed rollout_id=rollout-0 termination_reason=context_exceeded"
    )
    assert record.exc_info is not None
    await env.aclose()


async def test_other_400_is_model_error_with_server_message(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.inject(Fault.status(400, error_code="bad_messages", message="malformed messages"))
    env = AnswerEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert env.reward_calls == []
    (record,) = env_records(caplog)
    assert record.levelno == logging.WARNING
    assert record.getMessage().endswith("termination_reason=model_error")
    assert "malformed messages" in caplog.text
    await env.aclose()


async def test_401_with_context_code_is_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.inject(Fault.status(401, error_code="context_budget_exceeded", message="denied"))
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "model_error"
    (record,) = env_records(caplog)
    assert record.levelno == logging.ERROR
    await env.aclose()


@pytest.mark.parametrize("status", [429, 500])
async def test_error_status_is_sent_once_and_is_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    mock_server.inject(Fault.status(status, message="model unavailable"), times=None)
    env = AnswerEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert len(mock_server.requests) == 1
    assert env.reward_calls == []
    (record,) = env_records(caplog)
    assert record.levelno == logging.ERROR
    assert record.getMessage() == (
        "base.rollout.model_failed rollout_id=rollout-0 termination_reason=model_error"
    )
    assert "model unavailable" in caplog.text
    await env.aclose()


@pytest.mark.parametrize("fault", [Fault.drop(), Fault.malformed()], ids=["drop", "malformed"])
async def test_broken_responses_are_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, fault: Fault
) -> None:
    mock_server.inject(fault)
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "model_error"
    assert rollout.rewards == {"correct": 0.0}
    assert [m["role"] for m in rollout.messages] == ["user"]
    (record,) = env_records(caplog)
    assert record.levelno == logging.ERROR and record.exc_info is not None
    await env.aclose()


async def test_empty_choices_is_model_error_without_traceback(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.inject(Fault.no_choices())
    env = AnswerEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "model_error"
    (record,) = env_records(caplog)
    assert record.getMessage() == (
        "base.rollout.model_failed rollout_id=rollout-0 termination_reason=model_error: "
        "response contained no choices"
    )
    assert record.exc_info is None
    await env.aclose()


async def test_no_authorization_header_sends_placeholder(mock_server: MockModelServer) -> None:
    class NoHeaders:
        async def headers_for_request(self, context: object) -> dict[str, str]:
            return {"X-Trace": "t1"}

    env = AnswerEnv()
    await env.run_rollout(make_request(mock_server, auth=NoHeaders()))
    (recorded,) = mock_server.requests
    assert recorded.headers["authorization"] == "Bearer benchmax-runtime-auth"
    assert recorded.headers["x-trace"] == "t1"
    await env.aclose()


async def test_connection_close_after_every_response_works(
    make_mock_server: object,
) -> None:
    server = await make_mock_server(  # type: ignore[operator]
        scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"]), keep_alive=False
    )
    env = ToolEnv()
    rollout = await env.run_rollout(make_request(server))
    assert rollout.termination_reason == "finished"
    first, second = server.requests
    assert first.connection != second.connection
    await env.aclose()


async def test_error_code_at_the_top_level_of_a_400_body() -> None:
    body = b'{"code": "context_budget_exceeded", "message": "prompt too long"}'
    async with fixed_response_server(400, body) as origin:
        request = dataclasses.replace(make_request_for_url(f"{origin}/v1"), rollout_id="r-top")
        rollout = await AnswerEnv().run_rollout(request)
    assert rollout.termination_reason == "context_exceeded"


async def test_error_code_inside_error_object_wins_over_top_level() -> None:
    body = b'{"error": {"code": "other", "message": "no"}, "code": "context_budget_exceeded"}'
    async with fixed_response_server(400, body) as origin:
        rollout = await AnswerEnv().run_rollout(make_request_for_url(f"{origin}/v1"))
    assert rollout.termination_reason == "model_error"


def make_request_for_url(base_url: str) -> Any:
    return RolloutRequest(
        rollout_id="rollout-0",
        example=Example(id="e", payload=dict(PAYLOAD)),
        model="test-model",
        base_url=base_url,
        model_auth=StaticBearerAuth("k"),
    )
