"""A credential in the base URL (``https://user:PASSWORD@host/v1``, the README's alternative
to ``--api-key-env``) works on every model call path and never shows (issue 28 kind 7).

aiohttp refuses credentials in a URL next to the ``Authorization`` header benchmax always
sends, so every rollout was a ``model_error``; now the credential leaves the URL and goes as
HTTP Basic, as curl, httpx and requests send it. Each test talks to a real local server
and asserts the header it received."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from tests.envs.base.support import AnswerEnv

from benchmax._url_credentials import (
    masked_url,
    split_url_credential,
    url_secrets,
    with_url_credential,
)
from benchmax.auth import ModelRequestContext, StaticBearerAuth
from benchmax.envs import Example
from benchmax.envs.shared_types import RolloutRequest
from benchmax.rewards import Judge, JudgeError
from benchmax.runner import NoModelAuth, RunConfig
from benchmax.testing import MockModelServer, scripted
from benchmax.tools import SimulatedUser

PASSWORD = "pa@ss:word-1234"
WRITTEN = "pa%40ss%3Aword-1234"  # as it is written in a URL
BASIC = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


def with_credential(url: str, userinfo: str = f"alice:{WRITTEN}") -> str:
    return url.replace("://", f"://{userinfo}@", 1)


# The URL, taken apart.


@pytest.mark.parametrize(
    ("url", "stripped", "authorization"),
    [
        ("http://u:p@h/v1", "http://h/v1", "Basic " + base64.b64encode(b"u:p").decode()),
        ("https://TOKEN@h:8443/v1?x=1#f", "https://h:8443/v1?x=1#f", "Basic VE9LRU46"),
        ("http://u:p@[::1]:8000/v1", "http://[::1]:8000/v1", "Basic dTpw"),
        ("http://u:p@h/s/{rollout_id}/v1", "http://h/s/{rollout_id}/v1", "Basic dTpw"),
        (
            "http://%C3%BC:%E2%82%AC@h/v1",
            "http://h/v1",
            "Basic " + base64.b64encode("ü:€".encode()).decode(),
        ),
        ("http://h/v1", "http://h/v1", None),
        ("http://h/v1?next=a@b", "http://h/v1?next=a@b", None),  # an @ outside the netloc
        ("http://@h/v1", "http://h/v1", None),
        ("not a url", "not a url", None),
        ("http://u:p@[::1/v1", "http://u:p@[::1/v1", None),  # urlsplit refuses it: left as is
    ],
)
def test_the_credential_leaves_the_url_as_basic_authorization(
    url: str, stripped: str, authorization: str | None
) -> None:
    found_url, credential = split_url_credential(url)
    assert found_url == stripped
    assert (credential and credential.authorization) == authorization
    assert "Basic" not in repr(credential) and "u:p" not in repr(credential)


def test_masking_and_secrets() -> None:
    url = with_credential("http://h/v1")
    assert masked_url(url) == "http://alice:***@h/v1"
    assert masked_url("http://TOKEN-123456@h/v1") == "http://***@h/v1"
    assert masked_url("http://h/v1") == "http://h/v1"
    assert url_secrets(url) == (WRITTEN, PASSWORD, BASIC.split()[1])
    token = base64.b64encode(b"TOKEN-123456:").decode()
    assert url_secrets("http://TOKEN-123456@h/v1") == ("TOKEN-123456", token)
    assert url_secrets("http://h/v1") == ()


def test_a_second_authorization_is_refused_without_either_value() -> None:
    _, credential = split_url_credential(with_credential("http://h/v1"))
    assert credential is not None
    assert with_url_credential({"X-Trace": "1"}, credential) == {
        "X-Trace": "1",
        "Authorization": BASIC,
    }
    with pytest.raises(ValueError, match="keep the credential in one of them") as refused:
        with_url_credential({"authorization": "Bearer sk-other"}, credential)
    assert PASSWORD not in str(refused.value) and "sk-other" not in str(refused.value)


def test_reprs_of_records_holding_a_base_url_mask_it() -> None:
    url = with_credential("http://127.0.0.1:9/v1")
    auth = StaticBearerAuth("sk-not-this-one-123")
    records: list[Any] = [
        Judge(model="m", base_url=url, auth=auth),
        SimulatedUser(model="m", base_url=url, auth=auth),
        ModelRequestContext(base_url=url, model="m", rollout_id="r"),
        RunConfig(model="m", base_url=url, output=None),
        RolloutRequest(
            rollout_id="r", example=Example(id="e", payload={}), model="m", base_url=url,
            model_auth=auth,
        ),
    ]  # fmt: skip
    for record in records:
        shown = repr(record)
        assert "alice:***@127.0.0.1:9" in shown, shown
        assert WRITTEN not in shown and PASSWORD not in shown
    assert RunConfig(model="m", base_url=url, output=None).public_base_url == masked_url(url)
    secrets = RunConfig(model="m", base_url=url, output=None).secrets()
    assert WRITTEN in secrets and PASSWORD in secrets


# Every model call path, against a real local server.


def _request(base_url: str, auth: Any = None) -> RolloutRequest[Any]:
    return RolloutRequest(
        rollout_id="rollout-0",
        example=Example(
            id="e",
            payload={"prompt_messages": [{"role": "user", "content": "6*7?"}], "answer": "42"},
        ),
        model="test-model",
        base_url=base_url,
        model_auth=NoModelAuth() if auth is None else auth,
    )


async def test_a_rollout_sends_the_url_credential_as_basic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MockModelServer(scripted(["42"])) as server:
        with caplog.at_level(logging.DEBUG):
            rollout = await AnswerEnv().run_rollout(_request(with_credential(server.base_url)))
        (call,) = server.requests
    assert rollout.termination_reason == "finished"
    assert rollout.rewards == {"correct": 1.0}
    assert call.headers["authorization"] == BASIC
    assert call.headers["host"] == server.base_url.split("/")[2]  # no userinfo in Host
    assert call.path == "/v1/chat/completions"
    assert WRITTEN not in caplog.text and PASSWORD not in caplog.text


async def test_a_url_credential_and_a_bearer_key_are_that_rollouts_model_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MockModelServer(scripted(["42"])) as server:
        with caplog.at_level(logging.WARNING):
            request = _request(
                with_credential(server.base_url), StaticBearerAuth("sk-bearer-12345")
            )
            rollout = await AnswerEnv().run_rollout(request)
        assert not server.requests  # refused before anything was sent
    assert rollout.termination_reason == "model_error"
    assert "keep the credential in one of them" in caplog.text
    assert WRITTEN not in caplog.text and PASSWORD not in caplog.text


async def test_a_judge_sends_the_url_credential_as_basic() -> None:
    async with MockModelServer(scripted(['{"score": 1}'])) as server:
        judge = Judge(model="j", base_url=with_credential(server.base_url), auth=NoModelAuth())
        verdict, _ = await judge.request_json("grade this", request_id="r-1")
        (call,) = server.requests
    assert verdict == {"score": 1}
    assert call.headers["authorization"] == BASIC
    assert call.path == "/v1/chat/completions"


async def test_a_judge_with_two_credentials_is_a_judge_error() -> None:
    async with MockModelServer(scripted(['{"score": 1}'])) as server:
        judge = Judge(
            model="j", base_url=with_credential(server.base_url),
            auth=StaticBearerAuth("sk-bearer-12345"), max_retries=0, auth_attempts=1,
        )  # fmt: skip
        with pytest.raises(JudgeError) as failed:
            await judge.request_json("grade this", request_id="r-1")
        assert not server.requests
    assert PASSWORD not in str(failed.value) and WRITTEN not in str(failed.value)


async def test_a_simulated_user_sends_the_url_credential_as_basic() -> None:
    async with MockModelServer(scripted(["It is order A17."])) as server:
        user = SimulatedUser(
            model="u", base_url=with_credential(server.base_url), auth=NoModelAuth()
        )
        example = Example(id="e", payload={"persona": "Dana.", "goal": "A refund."})
        said = await user.reply("r-1", [{"role": "assistant", "content": "Which order?"}], example)
        (call,) = server.requests
    assert said == "It is order A17."
    assert call.headers["authorization"] == BASIC


async def test_the_judge_check_sends_the_url_credential_as_basic() -> None:
    from benchmax.runner._judge_check import check_judges

    async with MockModelServer(scripted(["x"])) as server:
        judge = Judge(model="m", base_url=with_credential(server.base_url), auth=NoModelAuth())
        await check_judges([judge], {}, ())
        (call,) = server.requests
    assert call.path == "/v1/models" and call.headers["authorization"] == BASIC
