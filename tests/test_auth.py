"""Tests for ``benchmax.auth``: static and injected auth, and runtime binding."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
from collections.abc import Mapping
from unittest import mock

import cloudpickle
import pytest

from benchmax import auth
from benchmax.auth import (
    InjectedAuth,
    ModelAuth,
    ModelRequestContext,
    StaticBearerAuth,
    bind_model_auth,
)

CTX = ModelRequestContext(base_url="http://h/v1", model="m", rollout_id="r-1")


class CountingAuth:
    """A provider recording each context it is asked about."""

    def __init__(self) -> None:
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        self.contexts.append(context)
        return {"Authorization": f"Bearer call-{len(self.contexts)}"}


# ModelRequestContext ---------------------------------------------------------


def test_request_context_is_frozen_value_type() -> None:
    same = ModelRequestContext(base_url="http://h/v1", model="m", rollout_id="r-1")
    assert same == CTX
    assert hash(same) == hash(CTX)
    assert CTX != ModelRequestContext(base_url="http://h/v1", model="m", rollout_id="r-2")
    assert [f.name for f in dataclasses.fields(ModelRequestContext)] == [
        "base_url",
        "model",
        "rollout_id",
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        CTX.model = "other"  # type: ignore[misc]
    assert not hasattr(CTX, "__dict__")


def test_request_context_has_no_validation() -> None:
    ModelRequestContext(base_url="", model="", rollout_id="")


# ModelAuth protocol ----------------------------------------------------------


def test_model_auth_protocol_uses_static_attribute_lookup() -> None:
    assert isinstance(StaticBearerAuth("t"), ModelAuth)
    assert isinstance(InjectedAuth("judge"), ModelAuth)
    assert isinstance(CountingAuth(), ModelAuth)

    class SyncHeaders:
        def headers_for_request(self, context: ModelRequestContext) -> dict[str, str]:
            return {}

    assert isinstance(SyncHeaders(), ModelAuth)  # signature and async-ness not checked
    assert not isinstance(object(), ModelAuth)
    assert not isinstance(mock.Mock(), ModelAuth)  # dynamic attributes do not count


# StaticBearerAuth ------------------------------------------------------------


async def test_static_bearer_auth_returns_fresh_bearer_header() -> None:
    static = StaticBearerAuth("secret")
    first = await static.headers_for_request(CTX)
    assert first == {"Authorization": "Bearer secret"}
    first["Authorization"] = "tampered"  # type: ignore[index]
    assert await static.headers_for_request(CTX) == {"Authorization": "Bearer secret"}


@pytest.mark.parametrize("token", ["", None, 3, b"tok"])
def test_static_bearer_auth_rejects_bad_token(token: object) -> None:
    with pytest.raises(ValueError, match="bearer token must be a non-empty string"):
        StaticBearerAuth(token)  # type: ignore[arg-type]


def test_static_bearer_auth_accepts_whitespace_token_without_stripping() -> None:
    assert StaticBearerAuth("  ").token == "  "


def test_static_bearer_auth_hides_token_and_round_trips() -> None:
    static = StaticBearerAuth("secret-token-value")
    assert "secret-token-value" not in repr(static)
    assert "secret-token-value" not in str(static)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, pickle.loads)):
        assert loads(dumps(static)) == static
    with pytest.raises(dataclasses.FrozenInstanceError):
        static.token = "x"  # type: ignore[misc]


# InjectedAuth ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "   ", None, 1])
def test_injected_auth_rejects_blank_name(name: object) -> None:
    with pytest.raises(ValueError, match="injected auth name must be a non-empty string"):
        InjectedAuth(name)  # type: ignore[arg-type]


async def test_injected_auth_without_binding_raises() -> None:
    with pytest.raises(
        RuntimeError, match=r"No runtime model-auth provider was injected for 'judge'\."
    ):
        await InjectedAuth("judge").headers_for_request(CTX)


async def test_injected_auth_with_missing_entry_raises() -> None:
    with bind_model_auth({"other": StaticBearerAuth("t")}):
        with pytest.raises(RuntimeError, match="No runtime model-auth provider"):
            await InjectedAuth("judge").headers_for_request(CTX)


async def test_injected_auth_delegates_on_every_call() -> None:
    provider = CountingAuth()
    injected = InjectedAuth("judge")
    with bind_model_auth({"judge": provider}):
        first = await injected.headers_for_request(CTX)
        second = await injected.headers_for_request(CTX)
    assert first == {"Authorization": "Bearer call-1"}
    assert second == {"Authorization": "Bearer call-2"}
    assert provider.contexts == [CTX, CTX]
    assert provider.contexts[0] is CTX


async def test_injected_auth_returns_provider_result_unchanged() -> None:
    sentinel = {"X-Key": "v"}

    class Exact:
        async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
            return sentinel

    with bind_model_auth({"judge": Exact()}):
        assert await InjectedAuth("judge").headers_for_request(CTX) is sentinel


async def test_injected_auth_cannot_reference_another_injected_auth() -> None:
    with bind_model_auth({"judge": InjectedAuth("other")}):
        with pytest.raises(
            RuntimeError,
            match=r"Injected model-auth provider 'judge' cannot reference another InjectedAuth\.",
        ):
            await InjectedAuth("judge").headers_for_request(CTX)


def test_injected_auth_round_trips_through_pickle_and_cloudpickle() -> None:
    injected = InjectedAuth("judge")
    assert pickle.loads(pickle.dumps(injected)) == injected
    assert cloudpickle.loads(cloudpickle.dumps(injected)) == injected
    assert repr(injected) == "InjectedAuth(name='judge')"


# bind_model_auth -------------------------------------------------------------


def test_bind_validates_on_enter_not_on_call() -> None:
    manager = bind_model_auth({"": StaticBearerAuth("t")})  # no error yet
    with pytest.raises(ValueError, match="model-auth provider names must be non-empty strings"):
        with manager:
            pass


@pytest.mark.parametrize("name", ["", "  ", 7])
def test_bind_rejects_bad_names(name: object) -> None:
    with pytest.raises(ValueError, match="model-auth provider names must be non-empty strings"):
        with bind_model_auth({name: StaticBearerAuth("t")}):  # type: ignore[dict-item]
            pass


def test_bind_rejects_non_auth_provider() -> None:
    with pytest.raises(
        TypeError, match=r"model-auth provider 'judge' does not implement ModelAuth"
    ):
        with bind_model_auth({"judge": object()}):  # type: ignore[dict-item]
            pass
    assert auth._BOUND_MODEL_AUTH.get() is None


def test_bind_validates_in_iteration_order() -> None:
    providers = {"first": object(), "": StaticBearerAuth("t")}
    with pytest.raises(TypeError, match="'first'"):
        with bind_model_auth(providers):  # type: ignore[arg-type]
            pass


def test_bind_copies_providers_and_restores_on_exit() -> None:
    assert auth._BOUND_MODEL_AUTH.get() is None
    providers = {"judge": StaticBearerAuth("t")}
    with bind_model_auth(providers):
        bound = auth._BOUND_MODEL_AUTH.get()
        assert type(bound) is dict
        assert bound == providers
        assert bound is not providers
        providers["late"] = StaticBearerAuth("u")
        assert "late" not in bound
    assert auth._BOUND_MODEL_AUTH.get() is None


def test_bind_restores_when_block_raises() -> None:
    with pytest.raises(KeyError):
        with bind_model_auth({"judge": StaticBearerAuth("t")}):
            raise KeyError("boom")
    assert auth._BOUND_MODEL_AUTH.get() is None


async def test_nested_binding_replaces_then_restores_outer() -> None:
    outer = StaticBearerAuth("outer")
    with bind_model_auth({"judge": outer, "only-outer": outer}):
        with bind_model_auth({"judge": StaticBearerAuth("inner")}):
            assert await InjectedAuth("judge").headers_for_request(CTX) == {
                "Authorization": "Bearer inner"
            }
            with pytest.raises(RuntimeError, match="only-outer"):  # no merging
                await InjectedAuth("only-outer").headers_for_request(CTX)
        assert await InjectedAuth("judge").headers_for_request(CTX) == {
            "Authorization": "Bearer outer"
        }


async def test_binding_is_visible_to_child_tasks_only() -> None:
    injected = InjectedAuth("judge")
    started = asyncio.Event()
    release = asyncio.Event()

    async def unrelated() -> BaseException | None:
        started.set()
        await release.wait()
        try:
            await injected.headers_for_request(CTX)
        except RuntimeError as error:
            return error
        return None

    outsider = asyncio.create_task(unrelated())  # created before the binding
    await started.wait()
    with bind_model_auth({"judge": StaticBearerAuth("t")}):
        child = asyncio.create_task(injected.headers_for_request(CTX))
        release.set()
        assert await child == {"Authorization": "Bearer t"}
        error = await outsider
    assert isinstance(error, RuntimeError)


def test_auth_module_surface() -> None:
    assert auth.__all__ == [
        "InjectedAuth",
        "ModelAuth",
        "ModelRequestContext",
        "StaticBearerAuth",
        "bind_model_auth",
    ]
    assert auth._BOUND_MODEL_AUTH.name == "benchmax_bound_model_auth"
