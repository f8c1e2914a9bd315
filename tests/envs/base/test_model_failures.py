"""How failing model calls end a rollout (fault injection over real HTTP)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from tests.envs.base.support import (
    AnswerEnv,
    ToolEnv,
    assert_env_record,
    env_record,
    fixed_response_server,
    make_request,
    make_request_for_url,
    tool_reply,
)

from benchmax._modelhttp.chat import ModelStatusError
from benchmax.auth import StaticBearerAuth
from benchmax.testing import Fault, MockModelServer, scripted

MODEL_FAILED = "base.rollout.model_failed rollout_id=rollout-0 termination_reason="


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
    assert_env_record(
        caplog,
        f"{MODEL_FAILED}context_exceeded",
        level=logging.WARNING,
        exc_type=ModelStatusError,
    )
    assert env_record(caplog).exc_info[1].status == 400
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
    assert_env_record(
        caplog, f"{MODEL_FAILED}model_error", level=logging.WARNING, exc_type=ModelStatusError
    )
    assert "malformed messages" in caplog.text
    await env.aclose()


async def test_401_with_context_code_is_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.inject(Fault.status(401, error_code="context_budget_exceeded", message="denied"))
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "model_error"
    assert_env_record(caplog, f"{MODEL_FAILED}model_error", exc_type=ModelStatusError)
    assert env_record(caplog).exc_info[1].status == 401
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
    assert_env_record(caplog, f"{MODEL_FAILED}model_error", exc_type=ModelStatusError)
    assert env_record(caplog).exc_info[1].status == status
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
    assert len(mock_server.requests) == 1  # sent once, never resent
    assert_env_record(caplog, f"{MODEL_FAILED}model_error", exc_type=Exception)
    await env.aclose()


async def test_empty_choices_is_model_error_without_traceback(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.inject(Fault.no_choices())
    env = AnswerEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert_env_record(caplog, f"{MODEL_FAILED}model_error: response contained no choices")
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


async def test_plain_text_error_body_reaches_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    async with fixed_response_server(502, b"upstream worker crashed") as origin:
        rollout = await AnswerEnv().run_rollout(make_request_for_url(f"{origin}/v1"))
    assert rollout.termination_reason == "model_error"
    assert "upstream worker crashed" in caplog.text


async def test_auth_headers_win_case_insensitively(mock_server: MockModelServer) -> None:
    class LowerCase:
        async def headers_for_request(self, context: object) -> dict[str, str]:
            return {"authorization": "Bearer lower", "User-Agent": "bench/1"}

    env = AnswerEnv()
    await env.run_rollout(make_request(mock_server, auth=LowerCase()))
    (recorded,) = mock_server.requests
    assert recorded.headers["authorization"] == "Bearer lower"
    assert recorded.headers["user-agent"] == "bench/1"
    await env.aclose()


@pytest.mark.parametrize(
    "token", ["sekrit-token\n", "sekrit-token ", "sekrit\x00token", "sekrit\r\nX-Evil: 1", "sékrit"]
)
async def test_unsendable_auth_header_fails_without_showing_the_secret(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, token: str
) -> None:
    caplog.set_level(logging.DEBUG)
    env = AnswerEnv(model_retries=2)
    rollout = await env.run_rollout(make_request(mock_server, auth=StaticBearerAuth(token)))
    assert rollout.termination_reason == "model_error"
    assert mock_server.requests == []
    assert "invalid value for header 'Authorization'" in caplog.text
    assert "krit" not in caplog.text
    await env.aclose()


async def test_invalid_auth_header_name_is_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    class BadName:
        async def headers_for_request(self, context: object) -> dict[str, str]:
            return {"X Secret sekrit": "v"}

    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server, auth=BadName()))
    assert rollout.termination_reason == "model_error"
    assert "invalid header name" in caplog.text and "sekrit" not in caplog.text
    assert mock_server.requests == []
    await env.aclose()


async def test_bearer_tokens_never_reach_the_logs(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, backoff_waits: list[float]
) -> None:
    caplog.set_level(logging.DEBUG)
    token = "sk-live-0123456789abcdef"
    mock_server.inject(Fault.status(401, message="bad key"), session="denied")
    mock_server.inject(Fault.status(503, message="busy"), session="retried")
    mock_server.inject(Fault.drop(), session="dropped")
    env = AnswerEnv(model_retries=1)
    for session in ("ok", "denied", "retried", "dropped"):
        request = make_request(mock_server, session, auth=StaticBearerAuth(token))
        await env.run_rollout(request)
        assert token not in repr(request)
    refused = dataclasses.replace(
        make_request_for_url("http://127.0.0.1:9/v1"), model_auth=StaticBearerAuth(token)
    )
    assert (await env.run_rollout(refused)).termination_reason == "model_error"
    assert len(mock_server.requests) == 6
    assert all(r.headers["authorization"] == f"Bearer {token}" for r in mock_server.requests)
    assert "bad key" in caplog.text and "busy" in caplog.text
    assert token not in caplog.text
    await env.aclose()
