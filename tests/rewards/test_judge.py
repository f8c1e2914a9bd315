"""Judge value, request protocol (through the ``AsyncOpenAI`` seam) and JSON parsing."""

from __future__ import annotations

import asyncio
import math
import pickle
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import cloudpickle
import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax._modelhttp.connections import sdk_http_module
from benchmax.auth import InjectedAuth, ModelRequestContext, StaticBearerAuth
from benchmax.envs.shared_types import RolloutFailure
from benchmax.rewards import Judge, JudgeError
from benchmax.rewards import judge as judge_module
from benchmax.rewards.judge import _parse_json_object, _RequestModelAuth

AUTH = StaticBearerAuth("secret-token")


def make_judge(**overrides: Any) -> Judge:
    fields: dict[str, Any] = {"model": "m", "base_url": "http://judge.invalid/v1", "auth": AUTH}
    fields.update(overrides)
    return Judge(**fields)


def status_error(cls: type[openai.APIStatusError], code: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://judge.invalid/v1/chat/completions")
    response = httpx.Response(code, request=request, json={"error": {"message": "no"}})
    return cls("rejected", response=response, body=None)


# --- JudgeError -------------------------------------------------------------


def test_judge_error_is_a_rollout_failure_with_judge_error_reason() -> None:
    error = JudgeError("judge unavailable")
    assert isinstance(error, RolloutFailure)
    assert isinstance(error, RuntimeError)
    assert error.termination_reason == "judge_error"
    assert str(error) == "judge unavailable"
    restored = pickle.loads(pickle.dumps(error))
    assert type(restored) is JudgeError
    assert restored.termination_reason == "judge_error"
    assert str(restored) == "judge unavailable"


# --- Judge validation and serialization ---------------------------------------


@pytest.mark.parametrize(
    ("overrides", "error", "fragment"),
    [
        ({"model": ""}, ValueError, "judge model must be non-empty"),
        ({"model": "  "}, ValueError, "judge model must be non-empty"),
        ({"model": 3}, ValueError, "judge model must be non-empty"),
        ({"base_url": ""}, ValueError, "judge base_url must be non-empty"),
        ({"auth": "Bearer x"}, TypeError, "judge auth must implement ModelAuth"),
        ({"timeout": 0}, ValueError, "judge timeout must be positive or None"),
        ({"timeout": -1.0}, ValueError, "judge timeout must be positive or None"),
        ({"timeout": True}, ValueError, "judge timeout must be positive or None"),
        ({"timeout": "5"}, ValueError, "judge timeout must be positive or None"),
        ({"timeout": math.nan}, ValueError, "judge timeout must be positive or None"),
        ({"max_retries": -1}, ValueError, "judge max_retries must be non-negative"),
        ({"max_retries": True}, ValueError, "judge max_retries must be non-negative"),
        ({"max_retries": 1.0}, ValueError, "judge max_retries must be non-negative"),
        ({"auth_attempts": 0}, ValueError, "judge auth_attempts must be positive"),
        ({"auth_attempts": True}, ValueError, "judge auth_attempts must be positive"),
        ({"max_concurrent_requests": 0}, ValueError, "max_concurrent_requests must be positive"),
        ({"max_concurrent_requests": 2.0}, ValueError, "max_concurrent_requests must be posi"),
        ({"max_concurrent_requests": True}, ValueError, "max_concurrent_requests must be pos"),
    ],
)
def test_judge_rejects_invalid_fields(
    overrides: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        make_judge(**overrides)


def test_judge_validation_order_reports_model_first() -> None:
    with pytest.raises(ValueError, match="model"):
        Judge(model="", base_url="", auth="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "error", "fragment"),
    [
        ({"base_url": "", "auth": "x"}, ValueError, "base_url"),
        ({"auth": "x", "timeout": 0}, TypeError, "ModelAuth"),
        ({"timeout": 0, "max_retries": -1}, ValueError, "timeout"),
        ({"max_retries": -1, "auth_attempts": 0}, ValueError, "max_retries"),
    ],
)
def test_judge_validation_follows_field_order(
    overrides: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        make_judge(**overrides)


def test_judge_defaults_and_none_timeout() -> None:
    judge = make_judge(timeout=None, max_retries=0)
    assert judge.timeout is None
    assert make_judge().timeout == 60.0
    assert (make_judge().max_retries, make_judge().auth_attempts) == (3, 3)
    assert make_judge().max_concurrent_requests == 64


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
@pytest.mark.parametrize("auth", [InjectedAuth("judge"), AUTH])
def test_judge_round_trips_through_pickle(dumps: Any, auth: Any) -> None:
    judge = make_judge(auth=auth, timeout=None)
    restored = pickle.loads(dumps(judge))
    assert restored == judge
    assert restored.auth == auth


def test_judge_is_frozen_slots_and_hides_the_token() -> None:
    judge = make_judge()
    with pytest.raises(AttributeError):
        judge.model = "other"  # type: ignore[misc]
    assert not hasattr(judge, "__dict__")
    assert "secret-token" not in repr(judge)


# --- request_json through the AsyncOpenAI seam --------------------------------


async def test_request_json_returns_parsed_object_and_stripped_raw(stub_judge, judge) -> None:
    stub_judge.script('  <think>hm</think>\n{"score": 1}  ')
    parsed, raw = await judge.request_json("grade this", request_id="rubric:q")
    assert parsed == {"score": 1}
    assert raw == '<think>hm</think>\n{"score": 1}'
    assert len(stub_judge.clients) == 1
    assert stub_judge.clients[0].close_calls == 1


async def test_request_json_builds_the_documented_client_and_request(stub_judge) -> None:
    judge = make_judge(timeout=None, max_retries=5)
    stub_judge.script('{"ok": true}')
    await judge.request_json("the prompt", request_id="rid")
    client = stub_judge.clients[0]
    assert client.args == ()
    assert set(client.kwargs) == {"base_url", "api_key", "http_client", "max_retries"}
    assert client.kwargs["http_client"] is not None
    assert client.kwargs["base_url"] == "http://judge.invalid/v1"
    assert client.kwargs["api_key"] == "benchmax-explicit-auth"
    assert client.kwargs["max_retries"] == 5
    http_client = client.kwargs["http_client"]
    assert isinstance(http_client, sdk_http_module().AsyncClient)  # httpx2 under openai 3
    assert isinstance(http_client.auth, sdk_http_module().Auth)
    assert type(http_client.auth).__qualname__ == "_RequestModelAuth"
    assert stub_judge.requests == [
        {
            "model": "m",
            "messages": [{"role": "user", "content": "the prompt"}],
            "temperature": 0.0,
            "timeout": None,
        }
    ]


async def test_request_json_passes_temperature_as_given_and_max_tokens_when_set(
    stub_judge, judge
) -> None:
    stub_judge.script('{"a": 1}', '{"a": 2}')
    await judge.request_json("p", request_id="r", temperature=1)
    await judge.request_json("p", request_id="r", temperature=0.5, max_tokens=7)
    first, second = stub_judge.requests
    assert first["temperature"] == 1 and type(first["temperature"]) is int
    assert "max_tokens" not in first
    assert first["timeout"] == 60.0
    assert second["max_tokens"] == 7 and second["temperature"] == 0.5


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"prompt": ""}, ValueError, "judge prompt must be non-empty"),
        ({"prompt": "  "}, ValueError, "judge prompt must be non-empty"),
        ({"request_id": ""}, ValueError, "judge request_id must be non-empty"),
        ({"temperature": "0"}, TypeError, "judge temperature must be numeric"),
        ({"temperature": True}, TypeError, "judge temperature must be numeric"),
        ({"temperature": math.inf}, ValueError, "judge temperature must be finite"),
        ({"temperature": math.nan}, ValueError, "judge temperature must be finite"),
        ({"max_tokens": 0}, ValueError, "judge max_tokens must be positive or None"),
        ({"max_tokens": True}, ValueError, "judge max_tokens must be positive or None"),
        ({"max_tokens": 2.0}, ValueError, "judge max_tokens must be positive or None"),
    ],
)
async def test_request_json_validates_arguments_before_any_client(
    stub_judge, judge, kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    arguments: dict[str, Any] = {"prompt": "p", "request_id": "r", **kwargs}
    prompt = arguments.pop("prompt")
    with pytest.raises(error, match=fragment):
        await judge.request_json(prompt, **arguments)
    assert stub_judge.clients == []


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"prompt": "", "request_id": ""}, ValueError, "prompt"),
        ({"request_id": "", "temperature": "hot"}, ValueError, "request_id"),
        ({"temperature": "hot", "max_tokens": 0}, TypeError, "numeric"),
        ({"temperature": math.nan, "max_tokens": 0}, ValueError, "finite"),
    ],
)
async def test_request_json_validation_order(
    stub_judge, judge, kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    arguments: dict[str, Any] = {"prompt": "p", "request_id": "r", **kwargs}
    with pytest.raises(error, match=fragment):
        await judge.request_json(arguments.pop("prompt"), **arguments)
    assert stub_judge.clients == []


async def test_unparseable_output_is_a_judge_error(stub_judge, judge) -> None:
    stub_judge.script("not-json")
    with pytest.raises(JudgeError, match="valid JSON object") as raised:
        await judge.request_json("p", request_id="r")
    assert str(raised.value).startswith("judge request failed: ")
    assert isinstance(raised.value.__cause__, ValueError)
    assert stub_judge.clients[0].close_calls == 1


@pytest.mark.parametrize("content", [None, "", "   \n"])
async def test_empty_response_is_a_judge_error(stub_judge, judge, content: str | None) -> None:
    stub_judge.script(content)
    with pytest.raises(JudgeError, match="judge returned an empty response"):
        await judge.request_json("p", request_id="r")
    assert stub_judge.clients[0].close_calls == 1


async def test_response_without_choices_is_an_empty_response(
    monkeypatch: pytest.MonkeyPatch, judge
) -> None:
    client = MagicMock()
    client.chat.completions.create = AsyncMock(return_value=SimpleNamespace(choices=[]))
    client.close = AsyncMock()
    monkeypatch.setattr(judge_module, "AsyncOpenAI", lambda *a, **k: client)
    with pytest.raises(JudgeError, match="empty response"):
        await judge.request_json("p", request_id="r")
    client.close.assert_awaited_once()


async def test_magicmock_client_configuring_only_the_content_works(
    monkeypatch: pytest.MonkeyPatch, judge
) -> None:
    response = MagicMock()
    response.choices[0].message.content = ' {"score": 1} '
    client = MagicMock()
    client.chat.completions.create = AsyncMock(return_value=response)
    client.close = AsyncMock()
    monkeypatch.setattr("benchmax.rewards.judge.AsyncOpenAI", MagicMock(return_value=client))
    assert await judge.request_json("p", request_id="r") == ({"score": 1}, '{"score": 1}')
    client.close.assert_awaited_once()
    client.__aenter__.assert_not_called()


async def test_transport_error_is_wrapped_with_its_message(stub_judge, judge) -> None:
    stub_judge.script(httpx.ReadTimeout("judge timed out"))
    with pytest.raises(JudgeError, match="judge timed out") as raised:
        await judge.request_json("p", request_id="r")
    assert isinstance(raised.value.__cause__, httpx.ReadTimeout)
    assert len(stub_judge.clients) == 1
    assert stub_judge.clients[0].close_calls == 1


async def test_cancellation_propagates_and_still_closes(stub_judge, judge) -> None:
    def cancelled(request: dict[str, Any]) -> BaseException:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # a real cancellation of the calling task, delivered mid-request
        return asyncio.CancelledError()

    stub_judge.script(cancelled)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(judge.request_json("p", request_id="r"))
    assert stub_judge.clients[0].close_calls == 1


async def test_a_stray_cancellation_is_a_judge_error_and_still_closes(stub_judge, judge) -> None:
    """beyond.md §9: CancelledError while the task is not being cancelled is judge_error."""
    stub_judge.script(asyncio.CancelledError())
    with pytest.raises(JudgeError, match="CancelledError while its task was not being cancelled"):
        await judge.request_json("p", request_id="r")
    assert stub_judge.clients[0].close_calls == 1


@pytest.fixture
def recorded_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(judge_module, "asyncio", SimpleNamespace(sleep=sleep))
    return sleeps


@pytest.mark.parametrize("error_class", [openai.AuthenticationError, openai.PermissionDeniedError])
async def test_auth_errors_are_retried_with_fresh_clients(
    stub_judge, recorded_sleeps: list[float], error_class: type[openai.APIStatusError]
) -> None:
    code = 401 if error_class is openai.AuthenticationError else 403
    stub_judge.script(status_error(error_class, code), status_error(error_class, code), '{"a": 1}')
    judge = make_judge(auth_attempts=3)
    assert await judge.request_json("p", request_id="r") == ({"a": 1}, '{"a": 1}')
    assert recorded_sleeps == [0.5, 1.0]
    assert len(stub_judge.clients) == 3
    assert [client.close_calls for client in stub_judge.clients] == [1, 1, 1]
    http_clients = [client.kwargs["http_client"] for client in stub_judge.clients]
    assert len({id(http_client) for http_client in http_clients}) == 3


async def test_exhausted_auth_attempts_raise_judge_authentication_failed(
    stub_judge, recorded_sleeps: list[float]
) -> None:
    last = status_error(openai.AuthenticationError, 401)
    stub_judge.script(status_error(openai.PermissionDeniedError, 403), last)
    judge = make_judge(auth_attempts=2)
    with pytest.raises(JudgeError, match="judge authentication failed: rejected") as raised:
        await judge.request_json("p", request_id="r")
    assert raised.value.__cause__ is last
    assert recorded_sleeps == [0.5]
    assert [client.close_calls for client in stub_judge.clients] == [1, 1]


async def test_single_auth_attempt_fails_without_sleeping(
    stub_judge, recorded_sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    stub_judge.script(status_error(openai.AuthenticationError, 401))
    with pytest.raises(JudgeError, match="judge authentication failed"):
        await make_judge(auth_attempts=1).request_json("p", request_id="r")
    assert recorded_sleeps == []
    assert len(stub_judge.clients) == 1
    assert "secret-token" not in caplog.text


async def test_non_auth_error_after_auth_error_stops_at_once(
    stub_judge, recorded_sleeps: list[float], judge
) -> None:
    stub_judge.script(status_error(openai.AuthenticationError, 401), RuntimeError("boom"))
    with pytest.raises(JudgeError, match="judge request failed: boom"):
        await judge.request_json("p", request_id="r")
    assert len(stub_judge.clients) == 2


async def test_async_openai_is_resolved_at_call_time(monkeypatch: pytest.MonkeyPatch, judge):
    assert judge_module.AsyncOpenAI is openai.AsyncOpenAI
    calls: list[str] = []

    def first(*args: Any, **kwargs: Any) -> Any:
        calls.append("first")
        raise RuntimeError("first factory")

    monkeypatch.setattr(judge_module, "AsyncOpenAI", first)
    with pytest.raises(JudgeError, match="first factory"):
        await judge.request_json("p", request_id="r")
    assert calls == ["first"]


# --- _RequestModelAuth ---------------------------------------------------------


class RotatingAuth:
    def __init__(self) -> None:
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context: ModelRequestContext) -> dict[str, str]:
        self.contexts.append(context)
        return {"Authorization": f"Bearer token-{len(self.contexts)}", "X-Extra": "yes"}


@pytest.mark.parametrize("library", ["httpx", "sdk"])
async def test_request_model_auth_resolves_headers_for_every_request(library: str) -> None:
    """0.2: ``_RequestModelAuth`` is an ``httpx.Auth`` driven by ``httpx.AsyncClient``,
    under openai 2 and 3 alike (beyond.md §9, issue 19 kind 8); the judge's own class
    for the installed SDK's library (httpx2 under openai 3) resolves headers the same way."""
    if library == "httpx":
        http: Any = httpx
        auth_class: Any = _RequestModelAuth
        assert issubclass(_RequestModelAuth, httpx.Auth)
    else:
        http = sdk_http_module()  # httpx2 for openai 3.x, httpx for 2.x
        auth_class = judge_module._sdk_auth_class()
    seen: list[tuple[str | None, str | None]] = []

    def handler(request: Any) -> Any:
        seen.append((request.headers.get("Authorization"), request.headers.get("X-Extra")))
        return http.Response(200, json={})

    auth = RotatingAuth()
    context = ModelRequestContext(base_url="http://x/v1", model="m", rollout_id="r")
    flow = auth_class(auth, context)
    assert isinstance(flow, http.Auth)
    async with http.AsyncClient(auth=flow, transport=http.MockTransport(handler)) as client:
        await client.get("http://x/v1/a", headers={"Authorization": "Bearer placeholder"})
        await client.get("http://x/v1/b")
    assert seen == [("Bearer token-1", "yes"), ("Bearer token-2", "yes")]
    assert auth.contexts == [context, context]


# --- _parse_json_object ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"score": 1}', {"score": 1}),
        ('```json\n{"score": 1}\n```', {"score": 1}),
        ('```\n{"score": 1}\n```', {"score": 1}),
        ('<think>private</think>\n{"score": 1}', {"score": 1}),
        ('<think>a {"x": 2}</think> <think>b</think>{"score": 1}', {"score": 1}),
        ('<think>line\n{"x": 2}\nline</think>\n{"score": 1}', {"score": 1}),
        ('preface {"score": 1} trailing', {"score": 1}),
        ('[{"a": 1}]', {"a": 1}),
        # beyond.md §7 (amends rewards.md §2.5): the last verdict object counts
        ('{"a": 1} {"b": 2}', {"b": 2}),
    ],
)
def test_parse_json_object_accepts(raw: str, expected: dict[str, Any]) -> None:
    assert _parse_json_object(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "not json",
        "[1, 2]",
        '{"score": }',
        "<think>{}</think>",
        "```",
        "{{",
        '```json\n{"a": 1}```',  # two lines: both dropped as fence lines, nothing left
        # beyond.md §9: the last object must parse; no inner or earlier object stands in
        '{"a": {"b": 1}',
    ],
)
def test_parse_json_object_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match="judge response did not contain a valid JSON object"):
        _parse_json_object(raw)


def test_parse_json_object_keeps_single_line_fence_and_matches_think_in_any_case() -> None:
    assert _parse_json_object('```{"a": 1}```') == {"a": 1}  # found by the scan
    # beyond.md §9 (amends §7's case-sensitive tags): upper-case tags are reasoning too
    assert _parse_json_object('<THINK>{"a": 0}</THINK>{"a": 1}') == {"a": 1}
    with pytest.raises(ValueError, match="inside <think>"):
        _parse_json_object('{"a": 1} <THINK>')


json_objects = st.dictionaries(
    st.text(max_size=5),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=3), children, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=4,
)


@given(
    value=json_objects,
    prefix=st.text(alphabet="abc ,.:\n", max_size=10),
    think=st.text(alphabet="xyz{}", max_size=6),
)
def test_parse_json_object_recovers_any_object_behind_prose_and_think(
    value: dict[str, Any], prefix: str, think: str
) -> None:
    import json

    raw = f"<think>{think}</think>{prefix}{json.dumps(value)}"
    assert _parse_json_object(raw) == value
    assert _parse_json_object(f"```json\n{json.dumps(value, indent=2)}\n```") == value
