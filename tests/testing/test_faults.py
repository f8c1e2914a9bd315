"""Injected faults, seen by a bare httpx client and by the OpenAI SDK."""

from __future__ import annotations

import asyncio
import pickle
import time

import httpx
import openai
import pytest

from benchmax.testing import Fault, MockModelServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


async def _post(server: MockModelServer, session: str = "") -> httpx.Response:
    async with httpx.AsyncClient(verify=False) as client:
        return await client.post(f"{server.session_url(session)}/chat/completions", json=CHAT)


def _sdk(server: MockModelServer, session: str = "") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=server.session_url(session),
        max_retries=0,
        http_client=httpx.AsyncClient(verify=False),
    )


async def _sdk_call(server: MockModelServer, session: str = ""):
    client = _sdk(server, session)
    try:
        return await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
    finally:
        await client.close()


# -- status faults --------------------------------------------------------------------------------


async def test_status_400_context_budget_exceeded(mock_server: MockModelServer) -> None:
    mock_server.inject(
        Fault.status(400, error_code="context_budget_exceeded", message="prompt too long")
    )
    response = await _post(mock_server)
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "prompt too long",
            "type": "invalid_request_error",
            "param": None,
            "code": "context_budget_exceeded",
        }
    }
    assert (await _post(mock_server)).status_code == 200  # times=1 by default


async def test_sdk_sees_bad_request_with_code_and_message(mock_server: MockModelServer) -> None:
    mock_server.inject(
        Fault.status(400, error_code="context_budget_exceeded", message="malformed messages")
    )
    with pytest.raises(openai.BadRequestError) as caught:
        await _sdk_call(mock_server)
    assert caught.value.code == "context_budget_exceeded"
    assert "malformed messages" in str(caught.value)


async def test_status_429_sends_retry_after(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(429, retry_after=3))
    mock_server.inject(Fault.status(429, retry_after=0.25))
    first = await _post(mock_server)
    second = await _post(mock_server)
    assert first.status_code == second.status_code == 429
    assert first.headers["retry-after"] == "3"
    assert second.headers["retry-after"] == "0.25"
    assert first.json()["error"]["type"] == "rate_limit_error"


async def test_sdk_sees_rate_limit_and_server_errors(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(429))
    mock_server.inject(Fault.status(500, message="worker crashed"))
    mock_server.inject(Fault.status(401))
    with pytest.raises(openai.RateLimitError):
        await _sdk_call(mock_server)
    with pytest.raises(openai.InternalServerError, match="worker crashed"):
        await _sdk_call(mock_server)
    with pytest.raises(openai.AuthenticationError):
        await _sdk_call(mock_server)
    assert (await _sdk_call(mock_server)).choices[0].message.content == "hello"


async def test_sdk_retries_through_injected_503(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(503, retry_after=0))
    client = openai.AsyncOpenAI(
        api_key="k",
        base_url=mock_server.base_url,
        max_retries=1,
        http_client=httpx.AsyncClient(verify=False),
    )
    try:
        response = await client.chat.completions.create(model="m", messages=CHAT["messages"])
    finally:
        await client.close()
    assert response.choices[0].message.content == "hello"
    assert len(mock_server.requests) == 2


def test_status_fault_defaults() -> None:
    fault = Fault.status(500)
    assert fault.kind == "status"
    assert fault.status_code == 500
    assert fault.error_code is None
    assert fault.message == "mock server injected HTTP 500"
    assert fault.error_type == "server_error"
    assert fault.retry_after is None


@pytest.mark.parametrize("code", [200, 399, 600, True, 429.0, "500"])
def test_status_fault_rejects_non_error_codes(code: object) -> None:
    with pytest.raises(ValueError, match="400 to 599"):
        Fault.status(code)  # type: ignore[arg-type]


@pytest.mark.parametrize("retry_after", [-1, float("nan"), float("inf")])
def test_status_fault_rejects_bad_retry_after(retry_after: float) -> None:
    with pytest.raises(ValueError, match="retry_after"):
        Fault.status(429, retry_after=retry_after)


def test_status_fault_rejects_non_string_error_code_and_message() -> None:
    with pytest.raises(TypeError, match="error_code"):
        Fault.status(400, error_code=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message"):
        Fault.status(400, message=b"x")  # type: ignore[arg-type]


# -- other faults ---------------------------------------------------------------------------------


async def test_delay_waits_then_answers(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.delay(0.3))
    started = time.monotonic()
    response = await _post(mock_server)
    assert time.monotonic() - started >= 0.3
    assert response.json()["choices"][0]["message"]["content"] == "hello"


async def test_delay_trips_client_timeout(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.delay(5))
    client = openai.AsyncOpenAI(
        api_key="k",
        base_url=mock_server.base_url,
        max_retries=0,
        timeout=0.2,
        http_client=httpx.AsyncClient(verify=False),
    )
    try:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=CHAT["messages"])
    finally:
        await client.close()


@pytest.mark.parametrize("seconds", [-0.1, float("nan"), float("inf"), 10**400])
def test_delay_rejects_bad_seconds(seconds: float) -> None:
    with pytest.raises(ValueError, match="delay"):
        Fault.delay(seconds)


def test_delay_rejects_non_numbers() -> None:
    with pytest.raises(TypeError, match="delay"):
        Fault.delay("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delay"):
        Fault.delay(True)


async def test_malformed_body_is_200_invalid_json(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.malformed(), times=2)
    response = await _post(mock_server)
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()
    with pytest.raises(ValueError):  # the SDK surfaces the JSON decoding error
        await _sdk_call(mock_server)


async def test_drop_closes_without_response(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.drop(), times=2)
    with pytest.raises(httpx.RemoteProtocolError):
        await _post(mock_server)
    with pytest.raises(openai.APIConnectionError):
        await _sdk_call(mock_server)
    assert (await _post(mock_server)).status_code == 200
    assert len(mock_server.requests) == 3


async def test_no_choices_is_a_200_with_empty_choices(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.no_choices(), times=2)
    response = await _post(mock_server)
    assert response.status_code == 200
    assert response.json()["choices"] == []
    assert response.json()["object"] == "chat.completion"
    completion = await _sdk_call(mock_server)
    assert completion.choices == []


@pytest.mark.parametrize(
    ("body", "sent"),
    [
        ({"choices": [{"message": None}]}, b'{"choices": [{"message": null}]}'),
        ([1, "two"], b'[1, "two"]'),
        (None, b"null"),
        ("\ud800", b'"\\ud800"'),
        ({"x": float("nan"), "y": float("-inf")}, b'{"x": NaN, "y": -Infinity}'),
        (b"\x00not json", b"\x00not json"),
    ],
    ids=["object", "list", "null", "lone-surrogate", "nan", "bytes"],
)
async def test_raw_serves_exactly_the_body(
    mock_server: MockModelServer, body: object, sent: bytes
) -> None:
    policy_calls: list[object] = []
    mock_server.policy = lambda request: policy_calls.append(request) or "unused"
    mock_server.inject(Fault.raw(body))
    response = await _post(mock_server)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.content == sent
    assert policy_calls == []  # the fault replaced the policy's answer
    assert (await _post(mock_server)).json()["choices"][0]["message"]["content"] == "unused"


async def test_raw_from_a_policy_with_another_status(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda request: Fault.raw({"error": {"code": 429}}, status=503)
    response = await _post(mock_server)
    assert response.status_code == 503
    assert response.json() == {"error": {"code": 429}}


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ((object(),), TypeError, "bytes or a JSON value"),
        (({1j: 2},), TypeError, "bytes or a JSON value"),
        (({}, 199), ValueError, "from 200 to 599"),
        (({}, 600), ValueError, "from 200 to 599"),
        (({}, True), ValueError, "from 200 to 599"),
    ],
)
def test_raw_validates_its_arguments(
    arguments: tuple[object, ...], error: type[Exception], match: str
) -> None:
    body, *status = arguments
    with pytest.raises(error, match=match):
        Fault.raw(body, **({"status": status[0]} if status else {}))


def test_raw_faults_are_values() -> None:
    fault = Fault.raw({"a": [1]})
    assert fault == Fault.raw(b'{"a": [1]}')
    assert fault != Fault.raw({"a": [1]}, status=500)
    assert hash(fault) == hash(Fault.raw(b'{"a": [1]}'))
    assert pickle.loads(pickle.dumps(fault)) == fault
    assert fault.kind == "raw" and fault.status_code == 200 and fault.body == b'{"a": [1]}'
    assert repr(fault) == """Fault.raw(b'{"a": [1]}', status=200)"""
    assert repr(Fault.raw(b"x" * 100)) == f"Fault.raw({b'x' * 60!r}..., status=200)"


# -- scheduling -----------------------------------------------------------------------------------


async def test_faults_fire_in_queue_order(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(500))
    mock_server.inject(Fault.status(429), times=2)
    mock_server.inject(Fault.drop(), session="other")
    assert mock_server.pending_faults == 3
    codes = [(await _post(mock_server)).status_code for _ in range(5)]
    assert codes == [500, 429, 429, 200, 200]
    assert mock_server.pending_faults == 1


async def test_times_none_fires_forever_until_cleared(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(503), times=None)
    assert [(await _post(mock_server)).status_code for _ in range(4)] == [503] * 4
    mock_server.clear_faults()
    assert (await _post(mock_server)).status_code == 200


async def test_session_fault_affects_only_that_session(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(500), session="bad")
    assert (await _post(mock_server, "good")).status_code == 200
    assert (await _post(mock_server)).status_code == 200
    assert (await _post(mock_server, "bad")).status_code == 500
    assert (await _post(mock_server, "bad")).status_code == 200


async def test_session_faults_fire_before_global_ones(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(429))
    mock_server.inject(Fault.status(500), session="s")
    assert (await _post(mock_server, "s")).status_code == 500
    assert (await _post(mock_server, "s")).status_code == 429
    assert (await _post(mock_server, "s")).status_code == 200


async def test_faults_do_not_touch_the_models_endpoint(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(500))
    async with httpx.AsyncClient(verify=False) as client:
        assert (await client.get(f"{mock_server.base_url}/models")).status_code == 200
    assert (await _post(mock_server)).status_code == 500


async def test_faulted_requests_are_recorded(mock_server: MockModelServer) -> None:
    mock_server.inject(Fault.status(500))
    await _post(mock_server, "s")
    assert [r.session for r in mock_server.requests] == ["s"]
    assert mock_server.requests[0].body == CHAT


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"times": 0}, ValueError),
        ({"times": -1}, ValueError),
        ({"times": True}, TypeError),
        ({"times": 1.0}, TypeError),
        ({"session": 3}, TypeError),
    ],
)
def test_inject_validates_arguments(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        MockModelServer().inject(Fault.drop(), **kwargs)


def test_inject_requires_a_fault() -> None:
    with pytest.raises(TypeError, match="Fault"):
        MockModelServer().inject("drop")  # type: ignore[arg-type]


# -- the Fault value ------------------------------------------------------------------------------


def test_faults_are_immutable_values() -> None:
    fault = Fault.status(429, error_code="rate", retry_after=1)
    assert fault == Fault.status(429, error_code="rate", retry_after=1)
    assert fault != Fault.status(429)
    assert hash(fault) == hash(Fault.status(429, error_code="rate", retry_after=1))
    assert pickle.loads(pickle.dumps(fault)) == fault
    with pytest.raises(AttributeError, match="immutable"):
        fault.message = "x"  # type: ignore[misc]
    assert repr(fault) == "Fault.status(429, error_code='rate', retry_after=1)"
    assert repr(Fault.delay(0.5)) == "Fault.delay(0.5)"
    assert repr(Fault.drop()) == "Fault.drop()"
    assert {f.kind for f in (Fault.malformed(), Fault.drop(), Fault.no_choices())} == {
        "malformed",
        "drop",
        "no_choices",
    }


def test_unknown_fault_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("explode")  # type: ignore[arg-type]


async def test_fault_can_be_raised_and_caught() -> None:
    with pytest.raises(Fault) as caught:
        raise Fault.status(418 + 82)
    assert caught.value.status_code == 500
    await asyncio.sleep(0)


# -- every kind, per call and per session -----------------------------------------------------

KINDS = {
    "status": Fault.status(503, error_code="overloaded"),
    "delay": Fault.delay(0.2),
    "malformed": Fault.malformed(),
    "drop": Fault.drop(),
    "no_choices": Fault.no_choices(),
}


async def _outcome(server: MockModelServer, session: str) -> str:
    """What one chat call of ``session`` saw, as a short label."""
    started = time.monotonic()
    try:
        response = await _post(server, session)
    except httpx.RemoteProtocolError:
        return "drop"
    if response.status_code != 200:
        return f"status {response.status_code} {response.json()['error']['code']}"
    try:
        data = response.json()
    except ValueError:
        return "malformed"
    if not data["choices"]:
        return "no_choices"
    return "delayed ok" if time.monotonic() - started >= 0.2 else "ok"


EXPECTED = {
    "status": "status 503 overloaded",
    "delay": "delayed ok",
    "malformed": "malformed",
    "drop": "drop",
    "no_choices": "no_choices",
}


def _plain(label: str) -> bool:
    """Whether a call saw no fault: "delayed ok" only means it took 0.2 s, which a busy
    machine may take without one (which calls a fault hit: ``pending_faults``)."""
    return label in ("ok", "delayed ok")


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_each_fault_kind_per_call(mock_server: MockModelServer, kind: str) -> None:
    mock_server.inject(KINDS[kind])
    assert await _outcome(mock_server, "") == EXPECTED[kind]
    assert mock_server.pending_faults == 0
    assert _plain(await _outcome(mock_server, ""))


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_each_fault_kind_per_session(mock_server: MockModelServer, kind: str) -> None:
    mock_server.inject(KINDS[kind], session="victim", times=2)
    assert _plain(await _outcome(mock_server, "bystander"))
    assert await _outcome(mock_server, "victim") == EXPECTED[kind]
    assert _plain(await _outcome(mock_server, ""))
    assert mock_server.pending_faults == 1  # one entry, one of its two uses left
    assert await _outcome(mock_server, "victim") == EXPECTED[kind]
    assert mock_server.pending_faults == 0
    assert _plain(await _outcome(mock_server, "victim"))
    assert mock_server.pending_faults == 0
