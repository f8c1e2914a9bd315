"""Assistant messages sent back to the model: ``content: null`` beside tool calls goes out
as ``""`` (llama-cpp-python's server refuses ``null`` there with an HTTP 500), while the
recorded transcript keeps ``null``; a 500 that is such a validation error is not retried.

The server here validates every request's messages the way llama-cpp-python's server does:
its request types (``llama_cpp.llama_types``: the assistant ``content`` is a string when
present) checked by pydantic, a failure answered as HTTP 500 carrying the validation
error's text, as its ``RouteErrorHandler`` does.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

import pytest
from pydantic import TypeAdapter, ValidationError
from tests.envs.base.support import PROMPT, ToolEnv, make_request, tool_reply

from benchmax.envs.base._sent_messages import messages_as_sent
from benchmax.testing import Fault, MockModelServer, scripted


class _TextPart(TypedDict):
    type: Literal["text"]
    text: str


class _System(TypedDict):
    role: Literal["system"]
    content: str | None


class _User(TypedDict):
    role: Literal["user"]
    content: str | list[_TextPart] | None


class _Function(TypedDict):
    name: str
    arguments: str


class _ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: _Function


class _Assistant(TypedDict):
    role: Literal["assistant"]
    content: NotRequired[str]
    tool_calls: NotRequired[list[_ToolCall]]


class _ToolMessage(TypedDict):
    role: Literal["tool"]
    content: str | None
    tool_call_id: str


_MESSAGES: TypeAdapter[Any] = TypeAdapter(list[_System | _User | _Assistant | _ToolMessage])


class StrictMessages:
    """A mock policy answering like llama-cpp-python's server: HTTP 500 with the
    validation error's text for messages its types refuse, else ``policy``'s reply."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.refused = 0

    def __call__(self, body: dict[str, Any], request: Any) -> Any:
        try:
            _MESSAGES.validate_python(body["messages"])
        except ValidationError as error:
            self.refused += 1
            raise Fault.status(500, message=str(error)) from None
        return self.policy(body, request)


def test_the_strict_validator_refuses_what_llama_cpp_python_refuses() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with pytest.raises(ValidationError, match="validation error"):
        _MESSAGES.validate_python([{"role": "assistant", "content": None, "tool_calls": [call]}])
    _MESSAGES.validate_python([{"role": "assistant", "content": "", "tool_calls": [call]}])
    _MESSAGES.validate_python([{"role": "assistant", "tool_calls": [call]}])


async def test_a_tool_turn_with_null_content_goes_on_against_a_strict_server(
    mock_server: MockModelServer,
) -> None:
    strict = StrictMessages(
        scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "The answer is 42."])
    )
    mock_server.policy = strict
    env = ToolEnv(model_retries=2)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished", rollout
    assert strict.refused == 0 and len(mock_server.requests) == 2
    sent = mock_server.requests[1].body["messages"][1]
    assert sent["content"] == "" and sent["tool_calls"][0]["function"]["name"] == "multiply"
    assert rollout.messages[1]["content"] is None  # the transcript is what the model sent
    assert list(rollout.messages[1]) == ["role", "content", "tool_calls"]
    await env.aclose()


async def test_a_validation_500_from_the_strict_server_is_not_retried(
    mock_server: MockModelServer, backoff_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    strict = StrictMessages(scripted(["never reached"]))
    mock_server.policy = strict
    parts = [{"type": "text", "text": "Be brief."}]  # a system message of parts: refused
    payload = {"prompt_messages": [{"role": "system", "content": parts}, *PROMPT]}
    env = ToolEnv(model_retries=3)
    rollout = await env.run_rollout(make_request(mock_server, payload=payload))
    assert rollout.termination_reason == "model_error"
    assert strict.refused == 1 and len(mock_server.requests) == 1 and backoff_waits == []
    assert "Error code: 500" in caplog.text and "validation error" in caplog.text
    await env.aclose()


def test_messages_as_sent_changes_only_null_content_beside_tool_calls() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    untouched = [
        {"role": "user", "content": None},
        {"role": "assistant", "content": None},  # no tool calls: kept as recorded
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
        {"role": "assistant", "tool_calls": [call]},  # no content key: none added
        {"role": "tool", "tool_call_id": "c", "content": None},
    ]
    assert messages_as_sent(untouched) is untouched
    null = {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [call]}
    messages = [PROMPT[0], null]
    sent = messages_as_sent(messages)
    assert sent is not messages and sent[0] is PROMPT[0]
    assert sent[1] == {**null, "content": ""}
    assert list(sent[1]) == ["role", "content", "reasoning_content", "tool_calls"]
    assert null["content"] is None and messages[1] is null  # nothing recorded is changed
