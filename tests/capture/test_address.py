"""Where the capture endpoint listens and the host its URLs name: 127.0.0.1 by default; a
``CaptureAddress`` binds another address and advertises another host (an agent in a Docker
container), the per-rollout keys still guarding it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from tests.capture.support import non_loopback_address

from benchmax.capture import CaptureAddress, CaptureEndpoint, loop_endpoint
from benchmax.envs import StaticBearerAuth
from benchmax.testing import MockModelServer, echo

UPSTREAM_KEY = "sk-upstream-never-shown-0123456789"


@pytest.fixture
async def token_mock() -> AsyncIterator[MockModelServer]:
    async with MockModelServer(echo, tokens=True) as server:
        yield server


async def _call(url: str, key: str) -> tuple[int, dict[str, object]]:
    body = {"model": "policy", "messages": [{"role": "user", "content": "over the bridge"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as reply,
    ):
        return reply.status, await reply.json()


async def test_the_default_is_loopback(token_mock: MockModelServer) -> None:
    assert CaptureAddress() == CaptureAddress("127.0.0.1", None)
    assert not CaptureAddress().exposed
    async with loop_endpoint() as endpoint:
        session = endpoint.open_session(
            rollout_id="r1",
            model="policy",
            upstream_url=token_mock.base_url,
            upstream_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        assert session.base_url.startswith("http://127.0.0.1:")
        assert endpoint.origin.startswith("http://127.0.0.1:")
        address = non_loopback_address()
        if address is not None:  # not listening beyond loopback: refused there
            port = endpoint.origin.rsplit(":", 1)[1]
            with pytest.raises(aiohttp.ClientConnectionError):
                await _call(f"http://{address}:{port}/rollouts/r1/v1", session.api_key)
        await endpoint.close_session(session)


async def test_bound_beyond_loopback_and_advertised_by_another_host(
    token_mock: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    address = CaptureAddress(bind="0.0.0.0", host="host.docker.internal")
    assert address.exposed and address.advertised == "host.docker.internal"
    with caplog.at_level(logging.WARNING, logger="benchmax.capture"):
        async with loop_endpoint(address) as endpoint, loop_endpoint() as local:
            assert endpoint is not local  # each address its own endpoint
            session = endpoint.open_session(
                rollout_id="r1",
                model="policy",
                upstream_url=token_mock.base_url,
                upstream_auth=StaticBearerAuth(UPSTREAM_KEY),
            )
            port = endpoint.origin.rsplit(":", 1)[1]
            # the URL the agent is given names the advertised host
            assert session.base_url == f"http://host.docker.internal:{port}/rollouts/r1/v1"
            reachable = non_loopback_address() or "127.0.0.1"
            url = f"http://{reachable}:{port}/rollouts/r1/v1"
            status, reply = await _call(url, session.api_key)
            assert status == 200 and len(session.calls) == 1
            assert reply["choices"][0]["message"]["content"] == "over the bridge"  # type: ignore[index]
            # the keys still guard it: another key is refused, and counted
            status, _ = await _call(url, "bmx-capture-guessed")
            assert status == 401 and endpoint.rejected_requests == 1
            assert len(session.calls) == 1
            await endpoint.close_session(session)
    warned = [r.getMessage() for r in caplog.records if "beyond_loopback" in r.getMessage()]
    assert len(warned) == 1 and "0.0.0.0" in warned[0]
    assert session.api_key not in caplog.text and UPSTREAM_KEY not in caplog.text


@pytest.mark.skipif(non_loopback_address() is None, reason="no non-loopback address here")
async def test_bound_to_one_address_and_advertised_as_it(token_mock: MockModelServer) -> None:
    """As with a docker bridge gateway: bind that address alone and name it in the URLs."""
    here = non_loopback_address()
    assert here is not None
    async with loop_endpoint(CaptureAddress(bind=here)) as endpoint:
        session = endpoint.open_session(
            rollout_id="r 2",
            model="policy",
            upstream_url=token_mock.base_url,
            upstream_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        assert session.base_url.startswith(f"http://{here}:")
        assert (await _call(session.base_url, session.api_key))[0] == 200
        port = endpoint.origin.rsplit(":", 1)[1]
        with pytest.raises(aiohttp.ClientConnectionError):  # not on loopback
            await _call(f"http://127.0.0.1:{port}/rollouts/r%202/v1", session.api_key)
        await endpoint.close_session(session)


async def test_ipv6_hosts_are_bracketed_in_urls() -> None:
    async with CaptureEndpoint(host="127.0.0.1", advertised_host="fd00::1") as endpoint:
        assert endpoint.origin.startswith("http://[fd00::1]:")
    async with CaptureEndpoint(host="127.0.0.1", advertised_host="[fd00::2]") as endpoint:
        assert endpoint.origin.startswith("http://[fd00::2]:")


@pytest.mark.parametrize(
    ("bind", "host", "error", "message"),
    [
        ("localhost", None, ValueError, "capture_bind must be an IP address of this machine"),
        ("host.docker.internal", None, ValueError, "capture_bind must be an IP address"),
        (8080, None, TypeError, "capture_bind must be an IP address string"),
        ("0.0.0.0", None, ValueError, "listens on every interface .* set capture_host"),
        ("::", None, ValueError, "listens on every interface"),
        ("0.0.0.0", "http://host.docker.internal", ValueError, "without scheme, port or path"),
        ("0.0.0.0", "host.docker.internal:8000", ValueError, "capture_host must be a host name"),
        ("0.0.0.0", "gateway/v1", ValueError, "capture_host must be a host name"),
        ("0.0.0.0", "", ValueError, "capture_host must be a host name"),
        ("0.0.0.0", "two words", ValueError, "capture_host must be a host name"),
        ("0.0.0.0", "0.0.0.0", ValueError, "capture_host '0.0.0.0' is a wildcard"),
        ("0.0.0.0", 17, TypeError, "capture_host must be a host name or IP address string"),
    ],
)
def test_bad_addresses_are_refused_naming_the_setting(
    bind: object, host: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        CaptureAddress(bind=bind, host=host)  # type: ignore[arg-type]


async def test_loop_endpoint_refuses_an_address_that_is_no_capture_address() -> None:
    with pytest.raises(TypeError, match=r"address must be a CaptureAddress.*'0\.0\.0\.0'"):
        async with loop_endpoint("0.0.0.0"):  # type: ignore[arg-type]
            pass


def test_a_bad_advertised_host_is_refused_by_the_endpoint() -> None:
    with pytest.raises(ValueError, match="advertised_host must be a host name"):
        CaptureEndpoint(advertised_host="http://x")


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", "[::]"])
def test_a_wildcard_host_needs_an_advertised_host(wildcard: str) -> None:
    with pytest.raises(ValueError, match=r"listens on every address.*advertised_host="):
        CaptureEndpoint(host=wildcard)
    CaptureEndpoint(host=wildcard, advertised_host="host.docker.internal")  # accepted


@pytest.mark.parametrize(
    ("bind", "host"),
    [
        ("172.17.0.1", None),
        ("0.0.0.0", "host.docker.internal"),
        ("::", "fd00::1"),
        ("::1", None),
        ("0.0.0.0", "gateway"),
    ],
)
def test_good_addresses(bind: str, host: str | None) -> None:
    address = CaptureAddress(bind=bind, host=host)
    assert address.advertised == (host or bind)
    assert address.exposed == (bind != "::1")
