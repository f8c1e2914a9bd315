"""One model call made before a run that records exact tokens: can the server return them?"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from benchmax._modelhttp.chat import CallFailure, complete_once
from benchmax._modelhttp.tokens import TOKEN_REQUEST_FIELDS, TokenDeficiency, read_call_tokens
from benchmax.auth import ModelAuth

__all__ = ["PREFLIGHT_MESSAGES", "PreflightProblem", "token_preflight"]

PREFLIGHT_MESSAGES: Final = ({"role": "user", "content": "Reply with the word OK."},)
"""The prompt of the preflight call."""


@dataclass(frozen=True, slots=True)
class PreflightProblem:
    """Why the preflight failed: the call itself failed (``call_failed``: refused
    credentials, a server down, ...), or the reply lacked what ``message`` says."""

    message: str
    call_failed: bool


_TOOL_ONLY_ARGS: Final = frozenset({"tool_choice", "parallel_tool_calls"})
# Body fields that servers refuse without ``tools`` (vLLM: "When using `tool_choice`,
# `tools` must be set"); the preflight sends no tools, so it leaves them out.
_PREFLIGHT_MAX_TOKENS: Final = 16
_PREFLIGHT_ROLLOUT_ID: Final = "tokens-preflight"
_SAID_LIMIT: Final = 300


async def token_preflight(
    *,
    base_url: str,
    model: str,
    auth: ModelAuth,
    sampling_args: Mapping[str, object],
    timeout: float | None = 120.0,
    retries: int = 2,
) -> PreflightProblem | None:
    """Make one chat call asking for tokens; ``None`` when the reply carried prompt ids,
    completion ids and aligned logprobs, else a :class:`PreflightProblem` saying what
    went wrong (the call failed, or what the reply lacked).

    The body is ``model``, :data:`PREFLIGHT_MESSAGES`, the token request fields, then
    ``sampling_args`` (as a run sends them) less the tool-only ones (``tool_choice``,
    ``parallel_tool_calls``: the preflight sends no tools), with ``max_tokens`` capped at 16.
    """
    body: dict[str, object] = {"model": model, "messages": [dict(m) for m in PREFLIGHT_MESSAGES]}
    body.update(TOKEN_REQUEST_FIELDS)
    body.update((k, v) for k, v in sampling_args.items() if k not in _TOOL_ONLY_ARGS)
    limit = body.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit > _PREFLIGHT_MAX_TOKENS:
        body["max_tokens"] = _PREFLIGHT_MAX_TOKENS
    decoded = await complete_once(
        body,
        base_url=base_url,
        model=model,
        auth=auth,
        rollout_id=_PREFLIGHT_ROLLOUT_ID,
        timeout=timeout,
        retries=retries,
    )
    if isinstance(decoded, CallFailure):
        said = " ".join(str(decoded.error).split()) or type(decoded.error).__name__
        if len(said) > _SAID_LIMIT:
            said = said[: _SAID_LIMIT - 3] + "..."
        return PreflightProblem(f"{decoded.termination_reason}: {said}", call_failed=True)
    tokens = read_call_tokens(decoded)
    if isinstance(tokens, TokenDeficiency):
        return PreflightProblem(tokens.message, call_failed=False)
    return None
