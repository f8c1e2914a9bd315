"""The preflight of a run's model endpoint: ``GET {base_url}/models`` with the run's own
credentials, before anything starts."""

from __future__ import annotations

import asyncio
import difflib

from benchmax._modelhttp import ModelsUnreachable, get_models
from benchmax.auth import ModelAuth, ModelRequestContext
from benchmax.cli._targets import TargetError

__all__ = ["check_endpoint"]


def check_endpoint(
    base_url: str, shown_url: str, model: str, model_auth: ModelAuth, *, check_model: bool
) -> str | None:
    """Preflight ``GET {base_url}/models`` with the run's own credentials.

    Raises ``TargetError`` when the endpoint cannot be reached, refuses the credentials
    (HTTP 401/403) or, with ``check_model``, lists models of which none is ``model``
    (naming the closest ones).
    Returns a note when the check could not be made (no usable model list: the run goes on).
    """
    if "{" in base_url:
        return "endpoint check skipped: the base URL changes per rollout ({rollout_id})"
    context = ModelRequestContext(base_url=base_url, model=model, rollout_id="preflight")
    try:
        headers = dict(asyncio.run(model_auth.headers_for_request(context)))
    except Exception as error:
        raise TargetError(f"cannot get the model credentials: {type(error).__name__}") from None
    try:
        response = asyncio.run(get_models(base_url, headers))
    except ModelsUnreachable as error:
        reason = str(error)
        if shown_url != base_url:
            reason = reason.replace(base_url, shown_url)
        raise TargetError(f"cannot reach the model endpoint {shown_url}: {reason}") from None
    if response.status in (401, 403):
        raise TargetError(
            f"the model endpoint {shown_url} refused the credentials (HTTP "
            f"{response.status} on GET /models); check the key in --api-key-env"
        )
    if not check_model:
        return None
    skipped = f"model check skipped: {shown_url} has no usable /models"
    if response.status != 200:
        return f"{skipped} (HTTP {response.status})"
    try:
        names = _served_models(response.json())
    except ValueError:
        names = None
    if not names:
        return f"{skipped} (not an OpenAI model list)"
    if model not in names:
        close = difflib.get_close_matches(model, names, n=3, cutoff=0.3)
        hint = f"closest: {', '.join(close)}" if close else f"it serves {', '.join(names[:5])}"
        raise TargetError(
            f"model {model!r} is not served by {shown_url} ({hint}); "
            "pass --no-model-check if the endpoint accepts models it does not list"
        )
    return None


def _served_models(data: object) -> list[str] | None:
    """The ``id`` of every model in an OpenAI ``/models`` answer; ``None`` for another shape."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    names = [m.get("id") for m in data["data"] if isinstance(m, dict)]
    return [name for name in names if isinstance(name, str)] or None
