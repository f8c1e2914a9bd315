"""Responses validate as the OpenAI SDK's own types, and the SDK drives a tool loop."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
import pydantic
import pytest
from openai.types import Model
from openai.types.chat import ChatCompletion

from benchmax.testing import Fault, MockModelServer, scripted, tool_exerciser

USER = [{"role": "user", "content": "hi"}]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "Oslo"]},
                    "nights": {"type": "integer", "minimum": 1, "maximum": 14},
                    "guests": {
                        "type": "array",
                        "minItems": 2,
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "minLength": 2},
                                "age": {"type": "integer", "minimum": 0},
                            },
                            "required": ["name", "age"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["city", "nights", "guests"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "ping", "parameters": {}}},
]


async def _raw(server: MockModelServer, **body: Any) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{server.base_url}/chat/completions", json={"model": "m", "messages": USER, **body}
        )
    assert response.status_code == 200, response.text
    return response.json()


def _strict(data: dict[str, Any]) -> ChatCompletion:
    """Validate with pydantic (the SDK itself parses leniently, without validation)."""
    return ChatCompletion.model_validate(data, strict=False)


async def test_text_reply_is_a_valid_chat_completion(mock_server: MockModelServer) -> None:
    completion = _strict(await _raw(mock_server))
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "hi"
    assert completion.usage is not None and completion.usage.total_tokens > 0


@pytest.mark.parametrize(
    "reply",
    [
        {"tool_calls": [{"name": "f", "arguments": {"x": 1}}]},
        {"content": "thinking", "tool_calls": [{"name": "f", "arguments": "{}"}, {"name": "g"}]},
        {
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]
        },
        {"content": "cut", "finish_reason": "length"},
        {"content": None, "refusal": "no"},
    ],
)
async def test_policy_replies_are_valid_chat_completions(
    mock_server: MockModelServer, reply: dict[str, Any]
) -> None:
    mock_server.policy = lambda body: reply
    completion = _strict(await _raw(mock_server))
    message = completion.choices[0].message
    if "tool_calls" in reply:
        assert message.tool_calls is not None
        assert completion.choices[0].finish_reason == "tool_calls"
        for call in message.tool_calls:
            assert call.type == "function"
            assert call.id
            assert isinstance(json.loads(call.function.arguments), dict)


async def test_fault_bodies_are_valid_chat_completions(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.no_choices())
    assert _strict(await _raw(mock_server)).choices == []
    mock_server.inject(Fault.delay(0))
    assert _strict(await _raw(mock_server)).choices[0].message.content == "hi"


def test_validation_is_real() -> None:
    with pytest.raises(pydantic.ValidationError):
        _strict({"id": "x", "object": "chat.completion", "created": 0, "model": "m"})


async def test_models_list_validates(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient() as client:
        data = (await client.get(f"{mock_server.base_url}/models")).json()
    [model] = [Model.model_validate(entry) for entry in data["data"]]
    assert model.id == "mock-model"
    client = openai.AsyncOpenAI(
        api_key="k", base_url=mock_server.base_url, http_client=httpx.AsyncClient()
    )
    try:
        assert [m.id async for m in client.models.list()] == ["mock-model"]
    finally:
        await client.close()


async def test_sdk_tool_loop_with_tool_exerciser(mock_server: MockModelServer) -> None:
    mock_server.policy = tool_exerciser
    client = openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=mock_server.session_url("loop"),
        max_retries=0,
        http_client=httpx.AsyncClient(),
    )
    messages: list[Any] = [{"role": "user", "content": "book it"}]
    try:
        first = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        _strict(first.model_dump())
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [call.function.name for call in calls] == ["book", "ping"]
        arguments = [json.loads(call.function.arguments) for call in calls]
        jsonschema.validate(arguments[0], TOOLS[0]["function"]["parameters"])
        assert arguments[1] == {}
        messages.append(choice.message.model_dump(exclude_none=True))
        messages += [{"role": "tool", "tool_call_id": call.id, "content": "ok"} for call in calls]
        final = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    finally:
        await client.close()
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "Called 2 tool(s): book, ping."
    assert [len(r.messages) for r in mock_server.requests_for("loop")] == [1, 4]


async def test_scripted_tool_call_round_trips_through_the_sdk(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted([{"tool_calls": [{"name": "ping", "arguments": {}}]}, "pong"])
    client = openai.AsyncOpenAI(
        api_key="k", base_url=mock_server.base_url, http_client=httpx.AsyncClient()
    )
    try:
        first = await client.chat.completions.create(model="m", messages=USER)
        second = await client.chat.completions.create(model="m", messages=USER)
    finally:
        await client.close()
    assert first.choices[0].message.tool_calls[0].function.name == "ping"  # type: ignore[index]
    assert second.choices[0].message.content == "pong"


async def test_stream_requests_are_refused_clearly(mock_server: MockModelServer) -> None:
    client = openai.AsyncOpenAI(
        api_key="k", base_url=mock_server.base_url, max_retries=0, http_client=httpx.AsyncClient()
    )
    try:
        with pytest.raises(openai.BadRequestError, match="does not stream") as caught:
            await client.chat.completions.create(model="m", messages=USER, stream=True)
    finally:
        await client.close()
    assert caught.value.code == "unsupported_parameter"
