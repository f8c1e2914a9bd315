"""SDK clients built by the library reuse one platform probe and send the same headers."""

from __future__ import annotations

import threading
from typing import Any

import openai
import pytest
from openai import _base_client
from tests.envs.base.support import AnswerEnv, make_request

from benchmax.auth import StaticBearerAuth
from benchmax.envs._sdk_platform import share_platform_probe
from benchmax.rewards import Judge, Rubric, score_rubrics
from benchmax.testing import MockModelServer

STAINLESS_OS = "x-stainless-os"


def test_a_new_sdk_client_gets_the_process_probe() -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:1/v1")
    share_platform_probe(client)
    assert client._platform == _base_client.get_platform()


def test_a_client_that_already_probed_keeps_its_answer() -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:1/v1")
    client._platform = "Custom"  # type: ignore[assignment]
    share_platform_probe(client)
    assert client._platform == "Custom"


def test_objects_without_a_probe_are_left_alone() -> None:
    class Stub:
        pass

    stub = Stub()
    share_platform_probe(stub)
    assert not hasattr(stub, "_platform")


async def test_rollouts_and_judges_probe_in_no_worker_thread(
    mock_server: MockModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    share_platform_probe(openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:1/v1"))
    probes: list[str] = []
    real_probe = _base_client.get_platform

    def counting_probe() -> Any:
        probes.append(threading.current_thread().name)
        return real_probe()

    monkeypatch.setattr(_base_client, "get_platform", counting_probe)
    env = AnswerEnv()
    try:
        await env.run_group([make_request(mock_server, f"r{k}") for k in range(3)])
    finally:
        await env.aclose()
    mock_server.policy = lambda body: '{"score": 1}'
    judge = Judge(model="judge", base_url=mock_server.base_url, auth=StaticBearerAuth("j"))
    await score_rubrics(
        "r0",
        "an answer",
        ground_truth="42",
        rubrics=[Rubric("A", "Good.")],
        question="Q?",
        judge=judge,
    )
    assert probes == []


async def test_headers_match_a_plain_sdk_client(mock_server: MockModelServer) -> None:
    plain = openai.AsyncOpenAI(api_key="k", base_url=mock_server.session_url("plain"))
    try:
        await plain.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        await plain.close()
    env = AnswerEnv()
    try:
        await env.run_group([make_request(mock_server, "r0")])
    finally:
        await env.aclose()
    (plain_request,) = mock_server.requests_for("plain")
    (rollout_request,) = mock_server.requests_for("r0")
    stainless = {
        name: value
        for name, value in plain_request.headers.items()
        if name.startswith("x-stainless")
    }
    assert stainless[STAINLESS_OS] == str(_base_client.get_platform())
    for name in (STAINLESS_OS, "x-stainless-arch", "x-stainless-runtime"):
        assert rollout_request.headers[name] == stainless[name]
