"""Policies answering through the real server (bare httpx and the OpenAI SDK)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from benchmax.testing import (
    Fault,
    MockModelServer,
    RecordedRequest,
    ScriptedPolicy,
    ToolExerciser,
    echo,
    load_policy,
    message_text,
    scripted,
    tool_exerciser,
)


async def _chat(
    server: MockModelServer, messages: list[dict[str, Any]], session: str = "", **extra: Any
) -> httpx.Response:
    async with httpx.AsyncClient(verify=False) as client:
        return await client.post(
            f"{server.session_url(session)}/chat/completions",
            json={"model": "m", "messages": messages, **extra},
        )


def _choice(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]


USER = [{"role": "user", "content": "hi"}]


# -- echo -----------------------------------------------------------------------------------------


async def test_echo_repeats_the_last_user_message(mock_server: MockModelServer) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
        {"role": "tool", "tool_call_id": "c", "content": "tool output"},
    ]
    choice = _choice(await _chat(mock_server, messages))
    assert choice["message"] == {"role": "assistant", "content": "second"}
    assert choice["finish_reason"] == "stop"


async def test_echo_reads_text_parts_like_every_reader(mock_server: MockModelServer) -> None:
    # beyond §7: the text of a part list is the concatenation of its text parts,
    # read by the one function in benchmax.rewards (re-exported here).
    content = [
        {"type": "text", "text": "look at"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "text", "text": "this"},
    ]
    choice = _choice(await _chat(mock_server, [{"role": "user", "content": content}]))
    assert choice["message"]["content"] == "look atthis"


def test_echo_without_user_message_is_empty() -> None:
    assert echo({"messages": [{"role": "system", "content": "x"}]}) == ""
    assert echo({}) == ""
    assert message_text(None) == ""


async def test_echo_through_the_openai_sdk(mock_server: MockModelServer) -> None:
    client = openai.AsyncOpenAI(
        api_key="k", base_url=mock_server.base_url, http_client=httpx.AsyncClient(verify=False)
    )
    try:
        completion = await client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "ping"}]
        )
    finally:
        await client.close()
    assert completion.choices[0].message.content == "ping"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gpt-x"


# -- scripted -------------------------------------------------------------------------------------


async def test_scripted_replays_in_order_per_session(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["one", {"content": "two"}, "three"])
    a = [_choice(await _chat(mock_server, USER, "a"))["message"]["content"] for _ in range(2)]
    b = [_choice(await _chat(mock_server, USER, "b"))["message"]["content"] for _ in range(3)]
    a.append(_choice(await _chat(mock_server, USER, "a"))["message"]["content"])
    assert a == ["one", "two", "three"]
    assert b == ["one", "two", "three"]


async def test_scripted_exhaustion_is_a_clear_500(mock_server: MockModelServer) -> None:
    policy = scripted(["only"])
    mock_server.policy = policy
    assert _choice(await _chat(mock_server, USER, "s"))["message"]["content"] == "only"
    response = await _chat(mock_server, USER, "s")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "script_exhausted"
    assert "session 's' made call 2 but the script has 1 replies" in error["message"]
    assert policy.position("s") == 2
    policy.reset()
    assert _choice(await _chat(mock_server, USER, "s"))["message"]["content"] == "only"


def _request(session: str) -> RecordedRequest:
    return RecordedRequest(session=session, method="POST", path="/", headers={}, body={}, time=0.0)


def test_scripted_repeat_last_and_cycle() -> None:
    repeat = scripted(["a", "b"], when_exhausted="repeat_last")
    cycle = scripted(["a", "b"], when_exhausted="cycle")
    assert [repeat({}, _request("s")) for _ in range(4)] == ["a", "b", "b", "b"]
    assert [cycle({}, _request("s")) for _ in range(5)] == ["a", "b", "a", "b", "a"]


def test_scripted_validates_its_script() -> None:
    with pytest.raises(ValueError, match="at least one"):
        scripted([])
    with pytest.raises(TypeError, match="reply 1"):
        scripted(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="when_exhausted"):
        scripted(["ok"], when_exhausted="loop")  # type: ignore[arg-type]
    policy = scripted(iter(["x", "y"]))
    assert isinstance(policy, ScriptedPolicy)
    assert policy.replies == ("x", "y")


async def test_scripted_tool_calls_short_and_full_forms(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(
        [
            {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
            {
                "content": "calling",
                "tool_calls": [
                    {
                        "id": "call-9",
                        "type": "function",
                        "function": {"name": "mul", "arguments": '{"x":3}'},
                    }
                ],
            },
            {"content": "cut", "finish_reason": "length"},
        ]
    )
    first = _choice(await _chat(mock_server, USER))
    assert first["finish_reason"] == "tool_calls"
    assert first["message"]["content"] is None
    [call] = first["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["id"]
    assert call["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    second = _choice(await _chat(mock_server, USER))
    assert second["message"]["content"] == "calling"
    assert second["message"]["tool_calls"] == [
        {"id": "call-9", "type": "function", "function": {"name": "mul", "arguments": '{"x":3}'}}
    ]
    third = _choice(await _chat(mock_server, USER))
    assert third == {
        "index": 0,
        "message": {"role": "assistant", "content": "cut"},
        "logprobs": None,
        "finish_reason": "length",
    }


async def test_scripted_tool_calls_parse_in_the_sdk(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(
        [{"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}, "done"]
    )
    client = openai.AsyncOpenAI(
        api_key="k",
        base_url=mock_server.session_url("sdk"),
        http_client=httpx.AsyncClient(verify=False),
    )
    try:
        first = await client.chat.completions.create(model="m", messages=USER)
        second = await client.chat.completions.create(model="m", messages=USER)
    finally:
        await client.close()
    [call] = first.choices[0].message.tool_calls
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"q": "x"}
    assert first.choices[0].finish_reason == "tool_calls"
    assert second.choices[0].message.content == "done"


async def test_scripted_fault_fires_at_its_turn(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["a", Fault.status(429, retry_after=1), "b"])
    assert _choice(await _chat(mock_server, USER))["message"]["content"] == "a"
    limited = await _chat(mock_server, USER)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "1"
    assert _choice(await _chat(mock_server, USER))["message"]["content"] == "b"


async def test_injected_fault_does_not_advance_the_script(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["a", "b"])
    mock_server.inject(Fault.status(500))
    assert (await _chat(mock_server, USER)).status_code == 500
    assert _choice(await _chat(mock_server, USER))["message"]["content"] == "a"


# -- custom policies ------------------------------------------------------------------------------


async def test_async_policy(mock_server: MockModelServer) -> None:
    async def policy(body: dict) -> str:
        await asyncio.sleep(0)
        return f"{len(body['messages'])} messages"

    mock_server.policy = policy
    assert _choice(await _chat(mock_server, USER * 3))["message"]["content"] == "3 messages"


async def test_two_argument_policy_sees_the_request(mock_server: MockModelServer) -> None:
    def policy(body: dict, request: RecordedRequest) -> str:
        return f"{request.session}:{request.headers['x-trace']}:{body['model']}"

    mock_server.policy = policy
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(
            f"{mock_server.session_url('s9')}/chat/completions",
            json={"model": "m", "messages": USER},
            headers={"X-Trace": "t1"},
        )
    assert _choice(response)["message"]["content"] == "s9:t1:m"


async def test_policy_may_return_or_raise_a_fault(mock_server: MockModelServer) -> None:
    def returning(body: dict) -> Fault:
        return Fault.status(400, error_code="context_budget_exceeded")

    async def raising(body: dict) -> str:
        raise Fault.no_choices()

    mock_server.policy = returning
    response = await _chat(mock_server, USER)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_budget_exceeded"
    mock_server.policy = raising
    response = await _chat(mock_server, USER)
    assert response.status_code == 200
    assert response.json()["choices"] == []


async def test_policy_drop_fault(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda body: Fault.drop()
    with pytest.raises(httpx.RemoteProtocolError):
        await _chat(mock_server, USER)


async def test_policy_returning_a_delay_fault_is_a_500(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda body: Fault.delay(1)
    response = await _chat(mock_server, USER)
    assert response.status_code == 500
    assert "asyncio.sleep" in response.json()["error"]["message"]


async def test_policy_exception_is_a_500_and_logged(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(body: dict) -> str:
        raise KeyError("nope")

    mock_server.policy = broken
    with caplog.at_level(logging.ERROR, logger="benchmax.testing"):
        response = await _chat(mock_server, USER)
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "mock_policy_error"
    assert "KeyError" in error["message"]
    assert "nope" in error["message"]
    assert any("failed" in r.getMessage() and r.exc_info for r in caplog.records)
    for _ in range(5):
        assert (await _chat(mock_server, USER)).status_code == 500  # server keeps serving
    # Issue 28 kind 12: one traceback for a policy that fails every request, not one each.
    told = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(told) == 1 and told[0].exc_info


@pytest.mark.parametrize("in_a_thread", [True, False])
async def test_a_policy_raising_stop_iteration_is_a_500_not_a_hang(
    mock_server: MockModelServer, in_a_thread: bool
) -> None:
    def exhausted(body: dict) -> str:
        return next(iter([]))  # e.g. next() over rows that do not match

    async def exhausted_async(body: dict) -> str:
        return exhausted(body)

    mock_server.policy = exhausted if in_a_thread else exhausted_async
    response = await asyncio.wait_for(_chat(mock_server, USER), 30)
    assert response.status_code == 500
    assert "StopIteration" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "answer",
    [
        42,
        None,
        ["x"],
        {"tool_calls": "x"},
        {"tool_calls": [5]},
        {"content": "x", "score": float("nan")},  # would not be valid JSON
        {"tool_calls": [{"name": "f", "arguments": {"x": float("inf")}}]},
        {"content": object()},
    ],
)
async def test_unusable_policy_answer_is_a_500(mock_server: MockModelServer, answer: Any) -> None:
    mock_server.policy = lambda body: answer
    response = await _chat(mock_server, USER)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "mock_policy_error"


async def test_message_dict_extra_keys_pass_through(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda body: {"content": "x", "refusal": None, "reasoning_content": "r"}
    message = _choice(await _chat(mock_server, USER))["message"]
    assert message == {
        "content": "x",
        "refusal": None,
        "reasoning_content": "r",
        "role": "assistant",
    }


# -- tool_exerciser -------------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "search the web",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 3},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10},
                    "mode": {"type": "string", "enum": ["fast", "deep"]},
                    "filters": {
                        "type": "object",
                        "properties": {
                            "site": {"type": "string", "format": "hostname"},
                            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                        },
                        "required": ["site", "tags"],
                        "additionalProperties": False,
                    },
                    "optional": {"type": "boolean"},
                },
                "required": ["query", "limit", "mode", "filters"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "now"}},
    {
        "type": "function",
        "function": {
            "name": "pick",
            "parameters": {
                "type": "object",
                "properties": {
                    "choice": {"anyOf": [{"type": "null"}, {"type": "number", "minimum": 2}]},
                    "fixed": {"const": "v1"},
                    "ratio": {"type": "number", "exclusiveMaximum": 1, "exclusiveMinimum": 0},
                },
                "required": ["choice", "fixed", "ratio"],
            },
        },
    },
]


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    return json.loads(call["function"]["arguments"])


async def test_tool_exerciser_calls_every_tool_then_answers(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = tool_exerciser
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = _choice(await _chat(mock_server, messages, tools=TOOLS))
    assert first["finish_reason"] == "tool_calls"
    calls = first["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["search", "now", "pick"]
    assert len({c["id"] for c in calls}) == 3
    for call, tool in zip(calls, TOOLS, strict=True):
        schema = tool["function"].get("parameters", {"type": "object"})
        jsonschema.validate(_arguments(call), schema)
    messages.append(first["message"])
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    final = _choice(await _chat(mock_server, messages, tools=TOOLS))
    assert final["finish_reason"] == "stop"
    assert final["message"]["content"] == "Called 3 tool(s): search, now, pick."


async def test_tool_exerciser_one_per_turn(mock_server: MockModelServer) -> None:
    mock_server.policy = ToolExerciser(one_per_turn=True, answer="all done")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    names = []
    for _ in range(3):
        choice = _choice(await _chat(mock_server, messages, tools=TOOLS))
        [call] = choice["message"]["tool_calls"]
        names.append(call["function"]["name"])
        messages += [
            choice["message"],
            {"role": "tool", "tool_call_id": call["id"], "content": "ok"},
        ]
    assert names == ["search", "now", "pick"]
    final = _choice(await _chat(mock_server, messages, tools=TOOLS))
    assert final["message"]["content"] == "all done"
    assert repr(mock_server.policy) == "ToolExerciser(one_per_turn=True, answer='all done')"
    assert repr(tool_exerciser) == "ToolExerciser(one_per_turn=False)"


async def test_tool_exerciser_without_tools_answers(mock_server: MockModelServer) -> None:
    mock_server.policy = tool_exerciser
    assert _choice(await _chat(mock_server, USER))["message"]["content"] == "No tools to call."


def test_tool_exerciser_ignores_malformed_tool_entries() -> None:
    body = {
        "messages": [],
        "tools": [
            "junk",
            {"type": "function", "function": {"name": 3}},
            {"type": "function", "function": {"name": "ok", "parameters": {"type": "object"}}},
        ],
    }
    reply = tool_exerciser(body)
    assert isinstance(reply, dict)
    assert [c["function"]["name"] for c in reply["tool_calls"]] == ["ok"]
    assert _arguments(reply["tool_calls"][0]) == {}


# -- load_policy ----------------------------------------------------------------------------------


def test_load_policy_builtins_and_module_paths(tmp_path: Path) -> None:
    assert load_policy("echo") is echo
    assert load_policy("tool_exerciser") is tool_exerciser
    assert load_policy("benchmax.testing:echo") is echo
    source = tmp_path / "my_policy_file.py"
    source.write_text("def answer(body):\n    return 'from file'\n")
    loaded = load_policy(f"{source}:answer")
    assert loaded({}) == "from file"


@pytest.mark.parametrize(
    ("spec", "phrase"),
    [
        ("nonsense", "must be"),
        ("no_such_module_xyz:f", "cannot import"),
        ("benchmax.testing:missing", "has no"),
        ("benchmax.testing:__doc__", "not callable"),
        ("/no/such/file.py:f", "cannot import"),
    ],
)
def test_load_policy_errors_are_one_line(spec: str, phrase: str) -> None:
    with pytest.raises(ValueError, match=phrase) as caught:
        load_policy(spec)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "parameters", [None, {}, {"type": "string"}, {"anyOf": [{"type": "null"}]}, "junk"]
)
def test_tool_exerciser_arguments_are_always_an_object(parameters: Any) -> None:
    function: dict[str, Any] = {"name": "t"}
    if parameters is not None:
        function["parameters"] = parameters
    reply = tool_exerciser({"messages": [], "tools": [{"type": "function", "function": function}]})
    assert isinstance(reply, dict)
    assert _arguments(reply["tool_calls"][0]) == {}


def test_tool_exerciser_calls_a_repeated_tool_name_once() -> None:
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    reply = tool_exerciser({"messages": [], "tools": [tool, tool]})
    assert isinstance(reply, dict)
    assert [call["function"]["name"] for call in reply["tool_calls"]] == ["t"]


# -- sync policies run off the event loop ---------------------------------------------------------


async def test_a_blocking_sync_policy_does_not_serialize_the_server(
    mock_server: MockModelServer,
) -> None:
    # Each call blocks until both have arrived: served one after the other, the first
    # would wait in vain and the barrier would break (HTTP 500).
    barrier = threading.Barrier(2, timeout=30)

    def blocking(body: dict[str, Any]) -> str:
        barrier.wait()
        time.sleep(0.01)
        return "both arrived"

    mock_server.policy = blocking
    first, second = await asyncio.gather(_chat(mock_server, USER), _chat(mock_server, USER))
    assert _choice(first)["message"]["content"] == "both arrived"
    assert _choice(second)["message"]["content"] == "both arrived"


async def test_a_sync_policy_in_a_thread_may_still_raise_a_fault(
    mock_server: MockModelServer,
) -> None:
    def failing(body: dict[str, Any]) -> str:
        raise Fault.status(429)

    mock_server.policy = failing
    assert (await _chat(mock_server, USER)).status_code == 429


class _AsyncCallable:
    async def __call__(self, body: dict[str, Any]) -> str:
        return "ok"


class _SyncCallable:
    def __call__(self, body: dict[str, Any]) -> str:
        return "ok"


async def _async_policy(body: dict[str, Any]) -> str:
    return "ok"


@pytest.mark.parametrize(
    ("policy", "inline"),
    [
        (echo, True),
        (scripted(["a"]), True),
        (tool_exerciser, True),
        (ToolExerciser(one_per_turn=True), True),
        (_async_policy, True),
        (_AsyncCallable(), True),
        (lambda body: "ok", False),
        (_SyncCallable(), False),
        (message_text, False),
    ],
)
def test_which_policies_run_on_the_event_loop(policy: Any, inline: bool) -> None:
    from benchmax.testing._policies import runs_inline

    assert runs_inline(policy) is inline
