"""Explicit sandbox-provider credentials and the scope that exposes them.

Which sandbox runs is decided by the trial template alone; a credentials object
only supplies that provider's secrets. They reach provider SDKs as process
environment variables, and only inside ``sandbox_credentials_scope``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from benchmax._value_checks import is_int_at_least, is_non_empty_str
from benchmax.envs.harbor._process_environment import PROCESS_ENVIRONMENT

__all__ = [
    "SandboxCredentials",
    "ModalCredentials",
    "DaytonaCredentials",
    "CustomSandboxCredentials",
]


@runtime_checkable
class SandboxCredentials(Protocol):
    """Secrets for one Harbor sandbox provider, exposed as environment variables."""

    @property
    def provider(self) -> str | None:
        """The Harbor sandbox these credentials belong to; ``None`` fits any sandbox."""
        ...

    def host_environment(self) -> Mapping[str, str]:
        """Return the environment variables the provider SDK reads."""
        ...


def _validated_environment(values: object) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise TypeError("sandbox credential environment must be a mapping")
    environment: dict[str, str] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            raise ValueError("sandbox credential names must be non-empty strings")
        if not isinstance(value, str) or not value:
            raise ValueError(f"sandbox credential {key!r} must be a non-empty string")
        environment[key] = value
    if not environment:
        raise ValueError("sandbox credentials must contain at least one value")
    return environment


def _require_secret(value: object, label: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{label} must be a non-empty string")


@dataclass(frozen=True, slots=True)
class ModalCredentials:
    """Modal token pair plus how long Modal may back off when throttled (``0`` disables)."""

    token_id: str = field(repr=False)
    token_secret: str = field(repr=False)
    max_throttle_wait_seconds: int = 60
    provider: str = field(default="modal", init=False, repr=False)

    def __post_init__(self) -> None:
        _require_secret(self.token_id, "Modal token_id")
        _require_secret(self.token_secret, "Modal token_secret")
        wait = self.max_throttle_wait_seconds
        if not is_int_at_least(wait, 0):
            raise ValueError("Modal max_throttle_wait_seconds must be a non-negative integer")

    def host_environment(self) -> Mapping[str, str]:
        """Return ``MODAL_TOKEN_ID``, ``MODAL_TOKEN_SECRET`` and ``MODAL_MAX_THROTTLE_WAIT``."""
        return {
            "MODAL_TOKEN_ID": self.token_id,
            "MODAL_TOKEN_SECRET": self.token_secret,
            "MODAL_MAX_THROTTLE_WAIT": str(self.max_throttle_wait_seconds),
        }


@dataclass(frozen=True, slots=True)
class DaytonaCredentials:
    """Daytona credentials: an API key, or a JWT token with its organization id."""

    api_key: str | None = field(default=None, repr=False)
    jwt_token: str | None = field(default=None, repr=False)
    organization_id: str | None = field(default=None, repr=False)
    target: str | None = None
    provider: str = field(default="daytona", init=False, repr=False)

    def __post_init__(self) -> None:
        has_api_key = self.api_key is not None
        has_jwt = self.jwt_token is not None or self.organization_id is not None
        if has_api_key == has_jwt:
            raise ValueError(
                "Daytona credentials require either api_key or both jwt_token and organization_id"
            )
        if has_api_key:
            _require_secret(self.api_key, "Daytona api_key")
        else:
            _require_secret(self.jwt_token, "Daytona jwt_token")
            _require_secret(self.organization_id, "Daytona organization_id")
        if self.target is not None and not self.target:
            raise ValueError("Daytona target must be non-empty when provided")

    def host_environment(self) -> Mapping[str, str]:
        """Return the ``DAYTONA_*`` variables of the configured mode."""
        environment: dict[str, str]
        if self.api_key is not None:
            environment = {"DAYTONA_API_KEY": self.api_key}
        else:
            assert self.jwt_token is not None and self.organization_id is not None
            environment = {
                "DAYTONA_JWT_TOKEN": self.jwt_token,
                "DAYTONA_ORGANIZATION_ID": self.organization_id,
            }
        if self.target is not None:
            environment["DAYTONA_TARGET"] = self.target
        return environment


@dataclass(frozen=True, slots=True)
class CustomSandboxCredentials:
    """Arbitrary environment variables for a custom Harbor sandbox implementation."""

    values: Mapping[str, str] = field(repr=False)
    provider: str | None = None

    def __post_init__(self) -> None:
        if self.provider is not None and not is_non_empty_str(self.provider):
            raise ValueError("custom sandbox credential provider must be non-empty")
        object.__setattr__(self, "values", _validated_environment(self.values))

    def host_environment(self) -> Mapping[str, str]:
        """Return a fresh copy of the configured variables."""
        return dict(self.values)


_ACTIVE_CREDENTIALS: ContextVar[int | None] = ContextVar(
    "benchmax_harbor_active_sandbox_credentials", default=None
)


@contextlib.asynccontextmanager
async def sandbox_credentials_scope(
    credentials: SandboxCredentials | None,
) -> AsyncIterator[None]:
    """Expose ``credentials`` in ``os.environ`` for the block, then restore.

    Re-entering with the same object in the same task context (or a child task)
    is a no-op; nesting a different object raises ``RuntimeError``. Concurrent
    scopes with equal environments share; conflicting ones wait their turn.
    """
    if credentials is None:
        yield
        return
    active = _ACTIVE_CREDENTIALS.get()
    if active == id(credentials):
        yield
        return
    if active is not None:
        raise RuntimeError("cannot nest different sandbox credential scopes")
    environment = _validated_environment(credentials.host_environment())
    await PROCESS_ENVIRONMENT.acquire(environment)
    marker = _ACTIVE_CREDENTIALS.set(id(credentials))
    try:
        yield
    finally:
        _ACTIVE_CREDENTIALS.reset(marker)
        PROCESS_ENVIRONMENT.release()
