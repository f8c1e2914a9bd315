"""Bad input on every OpenEnv route gets the protocol's own error, never a traceback;
MCP tools through openenv-core's MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import pytest
from openenv.core.env_server.mcp_types import JsonRpcResponse
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    HealthResponse,
    SchemaResponse,
    State,
    WSErrorResponse,
)
from openenv.core.mcp_client import MCPToolClient
from tests.serving.conftest import CALCULATOR, served

from benchmax.serving import RunningServer
from benchmax.testing import MockModelServer

BOUND = 60.0


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    async with MockModelServer(CALCULATOR.policy(), record=False) as mock:
        async with served(CALCULATOR, mock) as running:
            yield running


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text


async def test_info_routes_validate_with_openenv_models(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    HealthResponse.model_validate((await http.get(server.base_url + "/health")).json())
    metadata = EnvironmentMetadata.model_validate(
        (await http.get(server.base_url + "/metadata")).json()
    )
    assert metadata.name == "CalculatorEnv"
    schema = SchemaResponse.model_validate((await http.get(server.base_url + "/schema")).json())
    assert "message" in schema.action["properties"]
    State.model_validate((await http.get(server.base_url + "/state")).json())


HTTP_CASES: list[tuple[str, Any, int, str]] = [
    ("/reset", b"{not json", 422, "not JSON"),
    ("/reset", [1, 2], 422, "JSON object"),
    ("/reset", {"seed": -1}, 422, "seed"),
    ("/reset", {"seed": "three"}, 422, "seed"),
    ("/reset", {"episode_id": ""}, 422, "episode_id"),
    ("/reset", {"example_id": "no-such-example"}, 422, "no example"),
    ("/reset", {"record_tokens": "yes"}, 422, "record_tokens"),
    ("/step", b"", 422, "not JSON"),
    ("/step", {"episode_id": "x"}, 422, "action"),
    ("/step", {"action": {"message": {"role": "assistant", "content": "hi"}}}, 422, "episode_id"),
    (
        "/step",
        {"action": {"message": {"role": "assistant", "content": "x"}}, "episode_id": "gone"},
        404,
        "no live episode",
    ),
    ("/step", {"action": {}, "episode_id": "x", "timeout_s": -2}, 422, "timeout_s"),
    (
        "/step",
        {"action": {}, "episode_id": "x", "request_id": "r" * 256},
        422,
        "request_id must be a non-empty string of at most 255 characters",
    ),
    (
        "/step",
        {"action": {}, "episode_id": "x", "request_id": 7},
        422,
        "request_id must be a non-empty string of at most 255 characters",
    ),
]


@pytest.mark.parametrize(("route", "body", "status", "text"), HTTP_CASES)
async def test_bad_http_input(
    server: RunningServer, http: httpx.AsyncClient, route: str, body: Any, status: int, text: str
) -> None:
    content = body if isinstance(body, bytes) else None
    reply = await http.post(
        server.base_url + route, content=content, json=None if content is not None else body
    )
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert text in str(detail)
    no_traceback(reply.text)


BAD_ACTIONS = [
    {"message": {"role": "user", "content": "hi"}},
    {"message": {"role": "assistant"}},
    {"message": {"role": "assistant", "content": 3}},
    {"message": {"role": "assistant", "content": "x"}, "logprobs": [0.1]},
    {"message": {"role": "assistant", "content": "x"}, "surprise": 1},
    {"text": "no message"},
]


@pytest.mark.parametrize("action", BAD_ACTIONS)
async def test_an_invalid_action_is_a_422_with_pydantic_errors_and_the_episode_goes_on(
    server: RunningServer, http: httpx.AsyncClient, action: dict[str, Any]
) -> None:
    reset = (await http.post(server.base_url + "/reset", json={"seed": 1})).json()
    episode_id = reset["observation"]["episode_id"]
    reply = await http.post(
        server.base_url + "/step", json={"action": action, "episode_id": episode_id}
    )
    assert reply.status_code == 422
    errors = reply.json()["detail"]
    assert isinstance(errors, list) and errors and all("msg" in error for error in errors)
    no_traceback(reply.text)
    good = {"message": {"role": "assistant", "content": "<answer>1</answer>"}}
    done = await http.post(
        server.base_url + "/step", json={"action": good, "episode_id": episode_id}
    )
    assert done.status_code == 200 and done.json()["done"] is True
    again = await http.post(
        server.base_url + "/step", json={"action": good, "episode_id": episode_id}
    )
    assert again.status_code == 404  # a finished HTTP episode is gone


WS_CASES: list[tuple[Any, str]] = [
    ("{nope", "INVALID_JSON"),
    ("[1]", "INVALID_JSON"),
    ({"type": "dance"}, "UNKNOWN_TYPE"),
    (
        {"type": "step", "data": {"message": {"role": "assistant", "content": "x"}}},
        "EXECUTION_ERROR",
    ),
    ({"type": "reset", "data": {"seed": -4}}, "VALIDATION_ERROR"),
    ({"type": "reset", "data": 7}, "VALIDATION_ERROR"),
    ({"type": "reset", "data": {}, "extra": 1}, "VALIDATION_ERROR"),
]


async def test_bad_websocket_messages_get_openenv_error_codes(server: RunningServer) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(server.base_url + "/ws") as ws:
        for message, code in WS_CASES:
            if isinstance(message, str):
                await ws.send_str(message)
            else:
                await ws.send_json(message)
            reply = await ws.receive_json(timeout=BOUND)
            error = WSErrorResponse.model_validate(reply)
            assert error.data["code"] == code, (message, reply)
            no_traceback(str(reply))
        await ws.send_json({"type": "reset", "data": {"seed": 2}})
        assert (await ws.receive_json(timeout=BOUND))["type"] == "observation"
        await ws.send_json({"type": "step", "data": {"message": {"role": "tool"}}})
        reply = await ws.receive_json(timeout=BOUND)
        assert reply["data"]["code"] == "VALIDATION_ERROR" and reply["data"]["errors"]
        await ws.send_json({"type": "state"})
        state = await ws.receive_json(timeout=BOUND)
        assert state["type"] == "state" and state["data"]["awaiting_action"] is True


MCP_CASES: list[tuple[Any, int]] = [
    (b"{bad", -32700),
    ({"jsonrpc": "1.0", "method": "tools/list", "id": 1}, -32600),
    ({"jsonrpc": "2.0", "id": 1}, -32600),
    ({"jsonrpc": "2.0", "method": "tools/list", "params": [1], "id": 1}, -32602),
    ({"jsonrpc": "2.0", "method": "nope", "id": 1}, -32601),
    ({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "add"}, "id": 1}, -32602),
    (
        {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"session_id": "zz", "name": "add"},
            "id": 1,
        },
        -32602,
    ),
    ({"jsonrpc": "2.0", "method": "openenv/session/close", "params": {}, "id": 1}, -32602),
]


@pytest.mark.parametrize(("body", "code"), MCP_CASES)
async def test_bad_mcp_requests_get_json_rpc_errors(
    server: RunningServer, http: httpx.AsyncClient, body: Any, code: int
) -> None:
    content = body if isinstance(body, bytes) else None
    reply = await http.post(
        server.base_url + "/mcp", content=content, json=None if content is not None else body
    )
    assert reply.status_code == 200
    answer = JsonRpcResponse.model_validate(reply.json())
    assert answer.error is not None and answer.error.code == code
    no_traceback(reply.text)


async def test_tools_over_mcp_with_openenv_core_mcp_client(server: RunningServer) -> None:
    client = MCPToolClient(base_url=server.base_url)
    client.use_production_mode = True
    try:
        tools = await client.list_tools()
        assert sorted(tool.name for tool in tools) == ["add", "multiply"]
        assert tools[0].input_schema["required"] == ["a", "b"]
        assert await client.call_tool("add", a=20, b=22) == '{"result":42}'
        assert await client.call_tool("multiply", a=6, b=7) == '{"result":42}'
        assert server.sessions.active == 1
    finally:
        await client.close()
    assert server.sessions.active == 0


async def test_mcp_messages_over_the_websocket(server: RunningServer) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(server.base_url + "/ws") as ws:
        await ws.send_json({"type": "reset", "data": {"seed": 0}})
        await ws.receive_json(timeout=BOUND)
        call = {"name": "add", "arguments": {"a": 1, "b": 2}}
        await ws.send_json(
            {
                "type": "mcp",
                "data": {"jsonrpc": "2.0", "method": "tools/call", "params": call, "id": 7},
            }
        )
        reply = await ws.receive_json(timeout=BOUND)
    assert reply["type"] == "mcp"
    answer = JsonRpcResponse.model_validate(reply["data"])
    assert answer.id == 7 and answer.result["content"][0]["text"] == '{"result":3}'


async def test_mcp_tool_arguments_past_64_bits_stay_exact(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    big = 98765432109876543210987654321
    created = await http.post(
        server.base_url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}},
    )
    session_id = created.json()["result"]["session_id"]
    params = f'{{"session_id": "{session_id}", "name": "add", "arguments": {{"a": {big}, "b": 1}}}}'
    call = f'{{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {params}}}'
    reply = await http.post(server.base_url + "/mcp", content=call.encode())
    assert reply.json()["result"]["content"][0]["text"] == f'{{"result":{big + 1}}}'


async def test_mcp_close_with_a_non_string_session_id_says_it_must_be_a_string(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    body = {
        "jsonrpc": "2.0",
        "method": "openenv/session/close",
        "params": {"session_id": 5},
        "id": 1,
    }
    answer = JsonRpcResponse.model_validate(
        (await http.post(server.base_url + "/mcp", json=body)).json()
    )
    assert answer.error is not None and answer.error.code == -32602
    assert "'session_id' must be a non-empty string" in answer.error.message


async def test_state_refuses_an_over_long_episode_id_without_echoing_it(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    long_id = "e" * 300
    reply = await http.get(server.base_url + "/state", params={"episode_id": long_id})
    assert reply.status_code == 422
    assert "episode_id must be a non-empty string of at most 255 characters" in reply.text
    assert long_id not in reply.text


async def test_a_json_rpc_notification_over_http_gets_no_reply_body(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    notification = {"jsonrpc": "2.0", "method": "tools/list"}
    reply = await http.post(server.base_url + "/mcp", json=notification)
    assert reply.status_code == 202 and reply.content == b""
    invalid = await http.post(server.base_url + "/mcp", json={"jsonrpc": "1.0", "method": "x"})
    assert invalid.json()["id"] is None and invalid.json()["error"]["code"] == -32600


async def test_a_json_rpc_notification_over_the_websocket_gets_nothing_back(
    server: RunningServer,
) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(server.base_url + "/mcp") as ws:
        await ws.send_json({"jsonrpc": "2.0", "method": "tools/list"})
        await ws.send_json({"jsonrpc": "2.0", "method": "tools/list", "id": 2})
        reply = await ws.receive_json(timeout=BOUND)
    assert reply["id"] == 2


async def test_an_mcp_notification_on_ws_gets_nothing_back(server: RunningServer) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(server.base_url + "/ws") as ws:
        await ws.send_json({"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list"}})
        listing = {"jsonrpc": "2.0", "method": "tools/list", "id": 3}
        await ws.send_json({"type": "mcp", "data": listing})
        reply = await ws.receive_json(timeout=BOUND)
    assert reply["type"] == "mcp" and reply["data"]["id"] == 3


async def test_http_reset_naming_an_episode_a_websocket_holds_is_refused(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    async with aiohttp.ClientSession() as client, client.ws_connect(server.base_url + "/ws") as ws:
        await ws.send_json({"type": "reset", "data": {"seed": 0, "episode_id": "held-by-ws"}})
        opened = await ws.receive_json(timeout=BOUND)
        assert opened["type"] == "observation", opened
        reply = await http.post(server.base_url + "/reset", json={"episode_id": "held-by-ws"})
        assert reply.status_code == 409
        assert "episode_id 'held-by-ws' is in use by a websocket session" in reply.text


async def test_http_reset_naming_an_mcp_session_is_refused(
    server: RunningServer, http: httpx.AsyncClient
) -> None:
    create = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}
    created = (await http.post(server.base_url + "/mcp", json=create)).json()
    session_id = created["result"]["session_id"]
    reply = await http.post(server.base_url + "/reset", json={"episode_id": session_id})
    assert reply.status_code == 409
    assert f"episode_id {session_id!r} is in use by a" in reply.text
