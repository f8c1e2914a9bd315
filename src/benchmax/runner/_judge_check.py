"""The judge check before a run: every distinct judge is reached once with its credential.

A run whose judge refuses its key, or cannot be reached, would otherwise train on a run
of ``judge_error`` zeros. Before the first group, each distinct :class:`Judge` reachable
from the environment (found as ``benchmax validate`` finds injected credentials: its
attributes, containers and class attributes) and each one declared in
``RunConfig.judges`` gets one ``GET {base_url}/models`` with the headers its auth gives
(the run's ``auth_providers`` bound, as in the run). HTTP 401/403, or no answer at all,
stops the run with one line; any other answer (a server without ``/models`` answers 404)
counts as reached. Costs no tokens. A ``benchmax.tools.SimulatedUser`` (a model endpoint
configured like a judge) found the same way is checked alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from benchmax._modelhttp import ModelsUnreachable, get_models
from benchmax._reachable import reachable_values
from benchmax._url_credentials import (
    masked_url,
    split_url_credential,
    url_secrets,
    with_url_credential,
)
from benchmax.auth import ModelAuth, ModelRequestContext, bind_model_auth
from benchmax.results import RunError
from benchmax.rewards import Judge
from benchmax.runner._config import credential_secrets, mask_secrets
from benchmax.tools import SimulatedUser

__all__ = ["JudgeCheckError", "check_judges", "distinct_judges"]

CHECK_TIMEOUT_SECONDS = 10.0
"""How long one judge has to answer the check."""

_PLACEHOLDER_AUTHORIZATION = "Bearer benchmax-explicit-auth"  # the judge SDK client's own
_HINT = "(--no-judge-check, or RunConfig(judge_check=False), skips this check)"


class JudgeCheckError(RunError):
    """A judge refused its credential or could not be reached before the run."""


def distinct_judges(env: Any, declared: Iterable[Judge] = ()) -> list[Judge | SimulatedUser]:
    """The judges (and simulated users) reachable from ``env`` and ``declared``, each
    distinct one once (equal ones are one), in the order found."""
    found: list[Judge | SimulatedUser] = []
    for value in [*reachable_values(env), *declared]:
        if isinstance(value, Judge | SimulatedUser) and value not in found:
            found.append(value)
    return found


async def check_judges(
    judges: Iterable[Judge | SimulatedUser],
    providers: Mapping[str, ModelAuth],
    secrets: Iterable[str],
) -> None:
    """Reach each judge once; raise :class:`JudgeCheckError` (one line, ``secrets`` and the
    judges' own bearer keys masked) at the first that refuses its credential (401/403) or
    does not answer."""
    judges = list(judges)
    hidden = (
        *secrets,
        *credential_secrets([judge.auth for judge in judges], None),
        *(secret for judge in judges for secret in url_secrets(judge.base_url)),
    )
    with bind_model_auth(dict(providers)):
        for judge in judges:
            problem = await _problem(judge)
            if problem is not None:
                raise JudgeCheckError(mask_secrets(f"{problem} {_HINT}", hidden))


async def _problem(judge: Judge | SimulatedUser) -> str | None:
    role = "the simulated user" if isinstance(judge, SimulatedUser) else "the judge"
    where = f"{role} {judge.model!r} at {masked_url(judge.base_url)}"
    context = ModelRequestContext(
        base_url=judge.base_url, model=judge.model, rollout_id="benchmax-judge-check"
    )
    # A user:password@ in the URL is sent as Basic authorization, as the judge sends it.
    base_url, url_credential = split_url_credential(judge.base_url)
    try:
        headers = {"Authorization": _PLACEHOLDER_AUTHORIZATION}
        given = await judge.auth.headers_for_request(context)
        if url_credential is not None:
            given = with_url_credential(given, url_credential)
        headers.update(given)
    except Exception as error:
        return f"judge check: cannot get the credential of {where}: {type(error).__name__}: {error}"
    try:
        answer = await get_models(base_url, headers, timeout=CHECK_TIMEOUT_SECONDS)
    except ModelsUnreachable as unreachable:
        kind = type(unreachable.error).__name__
        return f"judge check: cannot reach {where}: {kind}: {unreachable}"
    if answer.status in (401, 403):
        return (
            f"judge check: {where} refused its credential (HTTP {answer.status}): "
            f"{answer.excerpt()}"
        )
    return None
