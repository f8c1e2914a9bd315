"""A target's environment constructed to score stored transcripts (``rescore``, ``traces
--baseline``), how a results header names that target, and the embedded mock model that
``'@mock'`` constructor arguments point at (also ``serve``'s)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._credentials import MOCK_KEY, injected_auth_names
from benchmax.cli._mock_policy import load_mock_policy
from benchmax.cli._targets import (
    EnvTarget,
    TargetError,
    substitute_mock,
    uses_mock,
)
from benchmax.envs import BaseEnv

__all__ = ["embedded_mock_url", "scoring_env", "target_definition"]


@contextlib.asynccontextmanager
async def embedded_mock_url(needed: bool, policy_spec: str) -> AsyncIterator[str | None]:
    """The base URL of an embedded mock model answering with ``policy_spec`` while the
    block runs, when ``needed`` (``'@mock'`` constructor arguments), else ``None``.
    Raises ``TargetError`` when the policy cannot be loaded."""
    if not needed:
        yield None
        return
    from benchmax.testing import MockModelServer

    try:
        policy = load_mock_policy(policy_spec)
    except TargetError as error:
        raise TargetError(
            f"{error} (the mock policy that '@mock' arguments need; pass --mock-policy)"
        ) from None
    async with MockModelServer(policy, record=False) as server:
        yield server.base_url


def target_definition(target: EnvTarget, env_args: Mapping[str, Any]) -> dict[str, Any]:
    """How a new header names a TARGET given on the command line."""
    if target.bundle_digest is not None:
        return {"bundle_digest": target.bundle_digest, "constructor_args": dict(env_args)}
    cls = target.env_class
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "constructor_args": dict(env_args)}


@contextlib.asynccontextmanager
async def scoring_env(
    target: EnvTarget,
    env_args: Mapping[str, Any],
    providers: Mapping[str, ModelAuth],
    *,
    mock_policy: str,
    needs: str,
) -> AsyncIterator[tuple[BaseEnv, dict[str, ModelAuth]]]:
    """``target``'s environment, constructed to score stored transcripts (``rescore``,
    ``traces --baseline``), with the credentials to bind; closed after the block.

    ``'@mock'`` constructor arguments point at an embedded mock answering with
    ``mock_policy``, and then every injected name (``providers``' included) gets the
    mock's key; otherwise an injected name without a provider is noted on stderr.
    Raises ``TargetError`` when it cannot be constructed or is not a ``BaseEnv``
    (``needs`` says why it must be one).
    """
    mock = uses_mock(env_args)
    async with embedded_mock_url(mock, mock_policy) as url:
        args = substitute_mock(env_args, url) if url is not None else dict(env_args)
        env = target.construct(args)
        try:
            if not isinstance(env, BaseEnv):
                raise TargetError(f"{target.label} is not a BaseEnv: {needs}")
            credentials = dict(providers)
            injected = injected_auth_names(env)
            if mock:
                for name in injected | set(providers):
                    credentials[name] = StaticBearerAuth(MOCK_KEY)
            elif missing := sorted(injected - set(providers)):
                Console(stderr=True).print(
                    f"[yellow]note:[/] no --auth given for injected credential(s) "
                    f"{escape(', '.join(missing))}; calls using them will fail",
                    soft_wrap=True,
                )
            yield env, credentials
        finally:
            await env.aclose()
