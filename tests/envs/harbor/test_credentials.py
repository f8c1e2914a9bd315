"""Sandbox credentials: validation, host environments, reprs and the scope."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping

import pytest

from benchmax.envs.harbor import (
    CustomSandboxCredentials,
    DaytonaCredentials,
    ModalCredentials,
    SandboxCredentials,
)
from benchmax.envs.harbor.credentials import sandbox_credentials_scope

MODAL_ID = "ak-modal-id-secret"
MODAL_SECRET = "as-modal-token-secret"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "MODAL_TOKEN_ID",
        "MODAL_TOKEN_SECRET",
        "MODAL_MAX_THROTTLE_WAIT",
        "DAYTONA_API_KEY",
        "CUSTOM_A",
        "CUSTOM_B",
    ):
        monkeypatch.delenv(name, raising=False)


# --- ModalCredentials -------------------------------------------------------------------


def test_modal_accepts_positional_secrets_and_hides_them() -> None:
    credentials = ModalCredentials(MODAL_ID, MODAL_SECRET)
    assert credentials.provider == "modal"
    assert repr(credentials) == "ModalCredentials(max_throttle_wait_seconds=60)"
    for text in (repr(credentials), str(credentials)):
        assert MODAL_ID not in text and MODAL_SECRET not in text
    assert credentials == ModalCredentials(token_id=MODAL_ID, token_secret=MODAL_SECRET)
    assert isinstance(credentials, SandboxCredentials)


def test_modal_host_environment() -> None:
    assert ModalCredentials(MODAL_ID, MODAL_SECRET).host_environment() == {
        "MODAL_TOKEN_ID": MODAL_ID,
        "MODAL_TOKEN_SECRET": MODAL_SECRET,
        "MODAL_MAX_THROTTLE_WAIT": "60",
    }
    zero = ModalCredentials(MODAL_ID, MODAL_SECRET, max_throttle_wait_seconds=0)
    assert zero.host_environment()["MODAL_MAX_THROTTLE_WAIT"] == "0"


@pytest.mark.parametrize("wait", [-1, 1.5, True, "60"])
def test_modal_rejects_bad_throttle_wait(wait: object) -> None:
    with pytest.raises(ValueError) as caught:
        ModalCredentials(MODAL_ID, MODAL_SECRET, max_throttle_wait_seconds=wait)  # type: ignore[arg-type]
    assert str(caught.value) == "Modal max_throttle_wait_seconds must be a non-negative integer"
    assert "non-negative integer" in str(caught.value)


@pytest.mark.parametrize(
    ("token_id", "token_secret", "message"),
    [
        ("", MODAL_SECRET, "Modal token_id must be a non-empty string"),
        (None, MODAL_SECRET, "Modal token_id must be a non-empty string"),
        (MODAL_ID, "", "Modal token_secret must be a non-empty string"),
        ("", "", "Modal token_id must be a non-empty string"),
    ],
)
def test_modal_requires_both_secrets(token_id: object, token_secret: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ModalCredentials(token_id, token_secret, max_throttle_wait_seconds=-1)  # type: ignore[arg-type]
    assert str(caught.value) == message


# --- DaytonaCredentials -----------------------------------------------------------------

BOTH_OR_NEITHER = "Daytona credentials require either api_key or both jwt_token and organization_id"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, BOTH_OR_NEITHER),
        ({"api_key": "k", "jwt_token": "j"}, BOTH_OR_NEITHER),
        ({"api_key": "k", "organization_id": "o"}, BOTH_OR_NEITHER),
        ({"api_key": ""}, "Daytona api_key must be a non-empty string"),
        ({"jwt_token": "j"}, "Daytona organization_id must be a non-empty string"),
        ({"organization_id": "o"}, "Daytona jwt_token must be a non-empty string"),
        ({"api_key": "k", "target": ""}, "Daytona target must be non-empty when provided"),
    ],
)
def test_daytona_validation(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        DaytonaCredentials(**kwargs)
    assert str(caught.value) == message


def test_daytona_api_key_mode() -> None:
    credentials = DaytonaCredentials(api_key="dtn-api-secret")
    assert credentials.provider == "daytona"
    assert credentials.host_environment() == {"DAYTONA_API_KEY": "dtn-api-secret"}
    assert repr(credentials) == "DaytonaCredentials(target=None)"


def test_daytona_jwt_mode_with_target() -> None:
    credentials = DaytonaCredentials(
        jwt_token="jwt-secret", organization_id="org-secret", target="eu"
    )
    assert credentials.host_environment() == {
        "DAYTONA_JWT_TOKEN": "jwt-secret",
        "DAYTONA_ORGANIZATION_ID": "org-secret",
        "DAYTONA_TARGET": "eu",
    }
    assert repr(credentials) == "DaytonaCredentials(target='eu')"
    assert "secret" not in repr(credentials)
    api = DaytonaCredentials(api_key="k", target="us")
    assert api.host_environment() == {"DAYTONA_API_KEY": "k", "DAYTONA_TARGET": "us"}


# --- CustomSandboxCredentials -----------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "error", "message"),
    [
        (["A=b"], TypeError, "sandbox credential environment must be a mapping"),
        ({"": "x"}, ValueError, "sandbox credential names must be non-empty strings"),
        ({1: "x"}, ValueError, "sandbox credential names must be non-empty strings"),
        ({"A": ""}, ValueError, "sandbox credential 'A' must be a non-empty string"),
        ({"A": 1}, ValueError, "sandbox credential 'A' must be a non-empty string"),
        ({}, ValueError, "sandbox credentials must contain at least one value"),
    ],
)
def test_custom_validates_its_mapping(values: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        CustomSandboxCredentials(values)  # type: ignore[arg-type]
    assert str(caught.value) == message


@pytest.mark.parametrize("provider", ["", "   "])
def test_custom_rejects_blank_provider_before_values(provider: str) -> None:
    with pytest.raises(ValueError) as caught:
        CustomSandboxCredentials({}, provider=provider)
    assert str(caught.value) == "custom sandbox credential provider must be non-empty"


def test_custom_copies_values_and_hides_them() -> None:
    source = {"CUSTOM_A": "custom-secret"}
    credentials = CustomSandboxCredentials(source, provider="mine")
    source["CUSTOM_A"] = "changed"
    environment = credentials.host_environment()
    assert environment == {"CUSTOM_A": "custom-secret"}
    assert type(environment) is dict and environment is not credentials.host_environment()
    assert repr(credentials) == "CustomSandboxCredentials(provider='mine')"
    assert repr(CustomSandboxCredentials({"X": "y"})) == "CustomSandboxCredentials(provider=None)"


def test_protocol_is_structural() -> None:
    class Anything:
        provider = None

        def host_environment(self) -> Mapping[str, str]:
            return {"X": "y"}

    assert isinstance(Anything(), SandboxCredentials)
    assert not isinstance(object(), SandboxCredentials)


# --- sandbox_credentials_scope ----------------------------------------------------------


async def test_none_scope_does_nothing() -> None:
    before = dict(os.environ)
    async with sandbox_credentials_scope(None):
        assert dict(os.environ) == before


async def test_scope_sets_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODAL_MAX_THROTTLE_WAIT", "7")
    credentials = ModalCredentials(MODAL_ID, MODAL_SECRET, max_throttle_wait_seconds=90)
    async with sandbox_credentials_scope(credentials):
        assert os.environ["MODAL_TOKEN_ID"] == MODAL_ID
        assert os.environ["MODAL_TOKEN_SECRET"] == MODAL_SECRET
        assert os.environ["MODAL_MAX_THROTTLE_WAIT"] == "90"
    assert os.environ["MODAL_MAX_THROTTLE_WAIT"] == "7"
    assert "MODAL_TOKEN_ID" not in os.environ
    assert "MODAL_TOKEN_SECRET" not in os.environ


async def test_scope_restores_after_an_exception() -> None:
    with pytest.raises(KeyError):
        async with sandbox_credentials_scope(CustomSandboxCredentials({"CUSTOM_A": "a"})):
            raise KeyError("boom")
    assert "CUSTOM_A" not in os.environ


async def test_reentry_with_same_object_is_a_no_op_even_in_child_tasks() -> None:
    credentials = CustomSandboxCredentials({"CUSTOM_A": "a"})
    async with sandbox_credentials_scope(credentials):
        async with sandbox_credentials_scope(credentials):
            assert os.environ["CUSTOM_A"] == "a"

        async def child() -> str:
            async with sandbox_credentials_scope(credentials):
                await asyncio.sleep(0)
                return os.environ["CUSTOM_A"]

        assert await asyncio.wait_for(asyncio.gather(child(), child()), 30) == ["a", "a"]
        # Still set: inner re-entries did not count as users and did not restore.
        assert os.environ["CUSTOM_A"] == "a"
    assert "CUSTOM_A" not in os.environ


async def test_nesting_a_different_object_raises_even_if_equal() -> None:
    outer = CustomSandboxCredentials({"CUSTOM_A": "a"})
    inner = CustomSandboxCredentials({"CUSTOM_A": "a"})
    assert outer == inner
    async with sandbox_credentials_scope(outer):
        with pytest.raises(RuntimeError) as caught:
            async with sandbox_credentials_scope(inner):
                pass
        assert str(caught.value) == "cannot nest different sandbox credential scopes"
        assert os.environ["CUSTOM_A"] == "a"
    assert "CUSTOM_A" not in os.environ


async def test_invalid_host_environment_fails_on_entry() -> None:
    class Broken:
        provider = None

        def host_environment(self) -> Mapping[str, str]:
            return {"CUSTOM_A": ""}

    with pytest.raises(ValueError, match="'CUSTOM_A' must be a non-empty string"):
        async with sandbox_credentials_scope(Broken()):
            pass
    assert "CUSTOM_A" not in os.environ


async def test_equal_environments_share_and_restore_after_last_user() -> None:
    first = CustomSandboxCredentials({"CUSTOM_A": "a"})
    second = CustomSandboxCredentials({"CUSTOM_A": "a"})
    first_in = asyncio.Event()
    second_in = asyncio.Event()
    release_first = asyncio.Event()

    async def use_first() -> None:
        async with sandbox_credentials_scope(first):
            first_in.set()
            await release_first.wait()

    async def use_second() -> None:
        await first_in.wait()
        async with sandbox_credentials_scope(second):
            second_in.set()
            release_first.set()
            await asyncio.sleep(0.02)
            # The first user left; the variables stay until the last one leaves.
            assert os.environ["CUSTOM_A"] == "a"

    await asyncio.wait_for(asyncio.gather(use_first(), use_second()), 30)
    assert second_in.is_set()
    assert "CUSTOM_A" not in os.environ


async def test_conflicting_environments_wait_for_the_active_users() -> None:
    first = CustomSandboxCredentials({"CUSTOM_A": "first"})
    second = CustomSandboxCredentials({"CUSTOM_A": "second", "CUSTOM_B": "b"})
    events: list[str] = []
    first_in = asyncio.Event()

    async def use(credentials: CustomSandboxCredentials, name: str) -> None:
        async with sandbox_credentials_scope(credentials):
            events.append(f"{name} in {os.environ['CUSTOM_A']} {os.environ.get('CUSTOM_B')}")
            first_in.set()
            await asyncio.sleep(0.05)
            events.append(f"{name} out")

    async def later() -> None:
        await first_in.wait()
        await use(second, "second")

    await asyncio.wait_for(asyncio.gather(use(first, "first"), later()), 30)
    assert events == ["first in first None", "first out", "second in second b", "second out"]
    assert "CUSTOM_A" not in os.environ and "CUSTOM_B" not in os.environ


async def test_cancelled_waiter_does_not_leak() -> None:
    first = CustomSandboxCredentials({"CUSTOM_A": "first"})
    second = CustomSandboxCredentials({"CUSTOM_A": "second"})
    release = asyncio.Event()

    async def hold() -> None:
        async with sandbox_credentials_scope(first):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0.01)
    waiter = asyncio.create_task(_enter_and_exit(second))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    assert os.environ["CUSTOM_A"] == "first"
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    await holder
    assert "CUSTOM_A" not in os.environ
    async with sandbox_credentials_scope(second):
        assert os.environ["CUSTOM_A"] == "second"


async def _enter_and_exit(credentials: CustomSandboxCredentials) -> None:
    async with sandbox_credentials_scope(credentials):
        pass


def test_scope_works_across_successive_and_concurrent_event_loops() -> None:
    credentials = CustomSandboxCredentials({"CUSTOM_A": "a"})

    async def enter() -> str:
        async with sandbox_credentials_scope(credentials):
            return os.environ["CUSTOM_A"]

    assert asyncio.run(enter()) == "a"
    assert asyncio.run(enter()) == "a"
    assert "CUSTOM_A" not in os.environ

    # A conflicting scope held on one loop (thread) makes another loop wait, then proceed.
    other = CustomSandboxCredentials({"CUSTOM_A": "other"})
    entered = threading.Event()
    release = threading.Event()
    seen: list[str] = []

    async def hold() -> None:
        async with sandbox_credentials_scope(other):
            entered.set()
            await asyncio.to_thread(release.wait, 60)

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    holder.start()
    assert entered.wait(60)

    async def wait_then_enter() -> None:
        task = asyncio.create_task(enter())
        await asyncio.sleep(0.05)
        assert not task.done()
        release.set()
        seen.append(await asyncio.wait_for(task, 60))

    asyncio.run(wait_then_enter())
    holder.join(60)
    assert seen == ["a"]
    assert "CUSTOM_A" not in os.environ
