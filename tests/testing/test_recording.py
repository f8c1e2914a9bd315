"""Request recording and credential masking."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import openai
import pytest

from benchmax.testing import Fault, MockModelServer, RecordedRequest, mask_header_value

SECRET = "sk-very-secret-token"


async def test_every_request_is_recorded_with_its_parts(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    before = time.time()
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": []}
    await http_client.post(
        f"{mock_server.session_url('r1')}/chat/completions?trace=1",
        json=body,
        headers={"Authorization": f"Bearer {SECRET}", "X-Extra": "e"},
    )
    await http_client.get(f"{mock_server.base_url}/models")
    first, second = mock_server.requests
    assert first.session == "r1"
    assert first.method == "POST"
    assert first.path == "/sessions/r1/v1/chat/completions"
    assert first.body == body
    assert first.messages == body["messages"]
    assert first.headers["authorization"] == f"Bearer {SECRET}"
    assert first.authorization == f"Bearer {SECRET}"
    assert first.headers["x-extra"] == "e"
    assert before <= first.time <= second.time <= time.time()
    assert (second.method, second.path, second.session, second.body) == (
        "GET",
        "/v1/models",
        "",
        None,
    )
    assert second.messages == []


async def test_requests_for_filters_by_session(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    body = {"messages": []}
    for session in ["a", "b", "a", ""]:
        await http_client.post(f"{mock_server.session_url(session)}/chat/completions", json=body)
    assert len(mock_server.requests_for("a")) == 2
    assert len(mock_server.requests_for("b")) == 1
    assert len(mock_server.requests_for("")) == 1
    assert mock_server.requests_for("zzz") == []


async def test_clear_requests(mock_server: MockModelServer, http_client: httpx.AsyncClient) -> None:
    await http_client.post(f"{mock_server.base_url}/chat/completions", json={"messages": []})
    snapshot = mock_server.requests
    mock_server.clear_requests()
    assert mock_server.requests == []
    assert len(snapshot) == 1  # snapshots are independent of the live record


async def test_unparsable_body_is_kept_raw(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    await http_client.post(f"{mock_server.base_url}/chat/completions", content=b"{oops")
    [record] = mock_server.requests
    assert record.body is None
    assert record.raw_body == b"{oops"


async def test_repr_masks_authorization(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    await http_client.post(
        f"{mock_server.base_url}/chat/completions",
        json={"messages": []},
        headers={"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET},
    )
    [record] = mock_server.requests
    for text in (repr(record), str(record), repr(mock_server.requests)):
        assert SECRET not in text
        assert "'authorization': 'Bearer ***'" in text
        assert "'x-api-key': '***'" in text


async def test_sdk_api_key_is_masked_in_repr(mock_server: MockModelServer) -> None:
    client = openai.AsyncOpenAI(
        api_key=SECRET, base_url=mock_server.base_url, http_client=httpx.AsyncClient(verify=False)
    )
    try:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        await client.close()
    [record] = mock_server.requests
    assert record.authorization == f"Bearer {SECRET}"
    assert SECRET not in repr(record)


async def test_logs_mask_authorization(
    mock_server: MockModelServer, http_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(body: dict) -> str:
        raise RuntimeError("policy broke")

    with caplog.at_level(logging.DEBUG, logger="benchmax.testing"):
        await http_client.post(
            f"{mock_server.base_url}/chat/completions",
            json={"messages": []},
            headers={"Authorization": f"Bearer {SECRET}"},
        )
        mock_server.policy = broken
        await http_client.post(
            f"{mock_server.base_url}/chat/completions",
            json={"messages": []},
            headers={"Authorization": f"Bearer {SECRET}"},
        )
    assert len(caplog.records) >= 3  # two "received" records and one policy failure
    assert "Bearer ***" in caplog.text
    assert SECRET not in caplog.text
    for record in caplog.records:
        assert SECRET not in record.getMessage()


@pytest.mark.parametrize(
    ("name", "value", "masked"),
    [
        ("Authorization", "Bearer abc", "Bearer ***"),
        ("authorization", "Basic dXNlcjpwYXNz", "Basic ***"),
        ("authorization", "rawtoken", "***"),
        ("proxy-authorization", "Bearer abc", "Bearer ***"),
        ("api-key", "abc", "***"),
        ("content-type", "application/json", "application/json"),
    ],
)
def test_mask_header_value(name: str, value: str, masked: str) -> None:
    assert mask_header_value(name, value) == masked


def test_recorded_request_is_frozen_with_read_only_headers() -> None:
    record = RecordedRequest(
        session="s", method="POST", path="/p", headers={"a": "b"}, body=None, time=1.0
    )
    with pytest.raises(AttributeError):
        record.session = "t"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.headers["a"] = "c"  # type: ignore[index]
    assert record == RecordedRequest(
        session="s", method="POST", path="/p", headers={"a": "b"}, body=None, time=1.0
    )


async def test_repeated_headers_are_joined(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    await http_client.post(
        f"{mock_server.base_url}/chat/completions",
        json={"messages": []},
        headers=[("X-Multi", "1"), ("X-Multi", "2")],
    )
    assert mock_server.requests[0].headers["x-multi"] == "1, 2"


async def test_no_debug_log_record_carries_a_secret(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Every record the server emits at DEBUG, message, arguments and traceback alike."""

    def leaky(body: dict, request: RecordedRequest) -> str:
        raise RuntimeError("policy broke")

    auth = {"Authorization": f"Bearer {SECRET}", "Proxy-Authorization": f"Basic {SECRET}"}
    url = f"{mock_server.base_url}/chat/completions"
    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient() as client:
            await client.post(url, json={"messages": []}, headers=auth)
            mock_server.inject(Fault.status(429, retry_after=1))
            await client.post(url, json={"messages": []}, headers=auth)
            mock_server.policy = leaky
            await client.post(url, json={"messages": []}, headers=auth)
            mock_server.policy = lambda body: 42
            await client.post(url, json={"messages": []}, headers=auth)
            await client.get(f"{mock_server.base_url}/models", headers=auth)
        raw = (
            b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer "
            + SECRET.encode()
            + b"\x01\r\n\r\n"
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", mock_server.port)
        writer.write(raw)
        await reader.read()
        writer.close()
        await writer.wait_closed()
    records = [r for r in caplog.records if r.name.startswith("benchmax.testing")]
    assert len(records) >= 7
    formatter = logging.Formatter()
    for record in records:
        assert SECRET not in formatter.format(record)
        assert SECRET not in repr(record.args)
        assert SECRET not in repr(record.__dict__)
