"""Call-time model authentication.

Every model HTTP request asks an auth object for its headers immediately before
it is sent. ``StaticBearerAuth`` carries a token; ``InjectedAuth`` is a named,
secret-free reference that the execution runtime binds with ``bind_model_auth``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from benchmax._url_credentials import repr_masking_urls
from benchmax._value_checks import is_non_empty_str

__all__ = [
    "InjectedAuth",
    "ModelAuth",
    "ModelRequestContext",
    "StaticBearerAuth",
    "bind_model_auth",
]


@dataclass(frozen=True, slots=True)
class ModelRequestContext:
    """Identifies the model request about to be authorized (the repr shows a password in
    ``base_url`` as ``user:***@``)."""

    base_url: str
    model: str
    rollout_id: str

    def __repr__(self) -> str:
        return repr_masking_urls(self, "base_url")


@runtime_checkable
class ModelAuth(Protocol):
    """Anything that returns the HTTP headers for one model request."""

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class StaticBearerAuth:
    """A fixed bearer token sent as ``Authorization: Bearer <token>``.

    The token is hidden from ``repr``; note that it is pickled with the value.
    """

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.token, str) or self.token == "":
            raise ValueError("bearer token must be a non-empty string")

    def __repr__(self) -> str:
        return "StaticBearerAuth(token='***')"

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


_BOUND_MODEL_AUTH: ContextVar[dict[str, ModelAuth] | None] = ContextVar(
    "benchmax_bound_model_auth", default=None
)


@dataclass(frozen=True, slots=True)
class InjectedAuth:
    """A named reference to a provider bound at run time with ``bind_model_auth``."""

    name: str

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.name):
            raise ValueError("injected auth name must be a non-empty string")

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        providers = _BOUND_MODEL_AUTH.get()
        provider = None if providers is None else providers.get(self.name)
        if provider is None:
            raise RuntimeError(f"No runtime model-auth provider was injected for {self.name!r}.")
        if isinstance(provider, InjectedAuth):
            raise RuntimeError(
                f"Injected model-auth provider {self.name!r} cannot reference another InjectedAuth."
            )
        return await provider.headers_for_request(context)


@contextlib.contextmanager
def bind_model_auth(providers: Mapping[str, ModelAuth]) -> Iterator[None]:
    """Bind named auth providers for ``InjectedAuth`` lookups inside the block."""
    bound = dict(providers)
    for name, provider in bound.items():
        if not is_non_empty_str(name):
            raise ValueError("model-auth provider names must be non-empty strings")
        if not isinstance(provider, ModelAuth):
            raise TypeError(f"model-auth provider {name!r} does not implement ModelAuth")
    token = _BOUND_MODEL_AUTH.set(bound)
    try:
        yield
    finally:
        _BOUND_MODEL_AUTH.reset(token)
