"""Exact tokens of a model call: what to ask for, and reading it from the reply.

A chat-completions server that can return the token ids it sampled does so when the
request carries :data:`TOKEN_REQUEST_FIELDS`. The field names, confirmed from the
servers' own OpenAI protocol and chat-serving modules (vLLM 0.33
``entrypoints/openai/chat_completion/protocol.py`` and ``serving.py``; SGLang 0.5
``srt/entrypoints/openai/protocol.py`` and ``serving_chat.py``):

Request (both servers ignore fields they do not know):

* ``logprobs: true`` - per sampled token, its logprob in ``choices[i].logprobs.content[j]``
  (``{"token", "logprob", "bytes", "top_logprobs"}``, one entry per generated token, in
  order; ``top_logprobs`` alternatives are not needed and not asked for).
* ``return_token_ids: true`` - vLLM: the reply's top-level ``prompt_token_ids`` and each
  choice's ``token_ids``; SGLang: each choice's ``prompt_token_ids`` and
  ``response_token_ids`` (SGLang's ``return_prompt_token_ids`` gives only the former).
* Not sent, but read: SGLang's ``return_input_ids_in_sglext`` /
  ``return_output_ids_in_sglext`` (or its server flags) put the ids in the reply's
  ``sglext.input_ids`` and ``sglext.output_ids[i]``; vLLM's ``return_tokens_as_token_ids``
  (a request field, or the server flag ``--return-tokens-as-token-ids``) writes each
  logprobs entry's ``token`` as the string ``"token_id:N"``, from which the completion
  ids are read when no id list is sent (and checked against the list when one is).

Reply, as read by :func:`read_call_tokens` (first choice), first source found wins:

* prompt ids: ``prompt_token_ids`` (vLLM), ``choices[0].prompt_token_ids`` (SGLang),
  ``sglext.input_ids``;
* completion ids: ``choices[0].token_ids`` (vLLM), ``choices[0].response_token_ids``
  (SGLang), ``sglext.output_ids[0]``, else the ``token_id:N`` strings of the logprobs;
* completion logprobs: ``choices[0].logprobs.content[j].logprob``, exactly one per
  completion id (vLLM writes ``-9999.0`` where it had none; kept as sent).

vLLM omits the ids and the logprobs when a reasoning parser runs with
``include_reasoning: false``; such a reply is a :class:`TokenDeficiency` like any other
reply without them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "TOKEN_REQUEST_FIELDS",
    "CallTokens",
    "TokenDeficiency",
    "read_call_tokens",
]

TOKEN_REQUEST_FIELDS: Final[Mapping[str, Any]] = MappingProxyType(
    {"logprobs": True, "return_token_ids": True}
)
"""Body fields asking vLLM and SGLang for the prompt ids, completion ids and logprobs."""

_TOKEN_ID_PREFIX: Final = "token_id:"
_INT_ONLY: Final = {int}
_FLOAT_ONLY: Final = {float}
_NUMBER_TYPES: Final = {float, int}


@dataclass(frozen=True, slots=True)
class CallTokens:
    """The tokens of one model call, as the server reported them.

    ``prompt_token_ids`` is the whole templated prompt the server sampled from;
    ``completion_token_ids`` the sampled tokens (stop token included when the server
    reports it); ``completion_logprobs`` one logprob (natural log, as sent) per completion
    token, aligned.
    """

    prompt_token_ids: tuple[int, ...]
    completion_token_ids: tuple[int, ...]
    completion_logprobs: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.completion_logprobs) != len(self.completion_token_ids):
            raise ValueError(
                f"completion_logprobs has {len(self.completion_logprobs)} entries for"
                f" {len(self.completion_token_ids)} completion tokens"
            )


@dataclass(frozen=True, slots=True)
class TokenDeficiency:
    """A reply without usable token data; ``lacked`` names what was missing or wrong,
    e.g. ``"prompt_token_ids (vLLM: top level; SGLang: choices[0])"``."""

    lacked: str

    @property
    def message(self) -> str:
        return f"the reply lacked {self.lacked}"


_PROMPT_IDS = "prompt token ids (prompt_token_ids: vLLM top level, SGLang choices[0])"
_COMPLETION_IDS = (
    "completion token ids (choices[0].token_ids: vLLM; choices[0].response_token_ids: SGLang;"
    " or token_id:N logprob tokens)"
)
_LOGPROBS = "completion logprobs (choices[0].logprobs.content)"


def read_call_tokens(body: object) -> CallTokens | TokenDeficiency:
    """The prompt ids, completion ids and aligned logprobs of a decoded reply's first
    choice (sources in the module docs), or a :class:`TokenDeficiency` naming what the
    reply lacked: a missing source, ids that are not non-negative integers, logprobs
    that are not finite numbers, or logprobs whose count (or ``token_id:N`` tokens)
    does not match the completion ids. Never raises on a JSON value."""
    if not isinstance(body, Mapping):
        return TokenDeficiency("a JSON object")
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, Mapping):
        return TokenDeficiency("choices[0]")
    sglext = body.get("sglext")
    if not isinstance(sglext, Mapping):
        sglext = {}
    prompt = body.get("prompt_token_ids")
    if prompt is None:
        prompt = choice.get("prompt_token_ids")
    if prompt is None:
        prompt = sglext.get("input_ids")
    prompt_ids = _ids(prompt)
    if prompt_ids is None:
        return TokenDeficiency(_PROMPT_IDS)
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list):
        return TokenDeficiency(_LOGPROBS)
    completion = choice.get("token_ids")
    if completion is None:
        completion = choice.get("response_token_ids")
    if completion is None:
        outputs = sglext.get("output_ids")
        if isinstance(outputs, list) and outputs:
            completion = outputs[0]
    if completion is None:
        completion = _ids_from_logprob_tokens(content)
    completion_ids = _ids(completion)
    if completion_ids is None:
        return TokenDeficiency(_COMPLETION_IDS)
    if len(content) != len(completion_ids):
        return TokenDeficiency(
            f"one logprob per completion token ({len(content)} logprobs for"
            f" {len(completion_ids)} completion token ids)"
        )
    values = _logprobs(content, completion_ids)
    if isinstance(values, TokenDeficiency):
        return values
    return CallTokens(prompt_ids, completion_ids, values)


def _ids(value: object) -> tuple[int, ...] | None:
    if type(value) is not list:
        return None
    if not value:
        return ()
    if set(map(type, value)) != _INT_ONLY or min(value) < 0:  # C-speed loops
        return None
    return tuple(value)


def _ids_from_logprob_tokens(content: list[Any]) -> list[int] | None:
    ids: list[int] = []
    for entry in content:
        token = entry.get("token") if isinstance(entry, Mapping) else None
        if not isinstance(token, str) or not token.startswith(_TOKEN_ID_PREFIX):
            return None
        number = token[len(_TOKEN_ID_PREFIX) :]
        if not number.isdigit():
            return None
        ids.append(int(number))
    return ids


def _logprobs(
    content: list[Any], completion_ids: tuple[int, ...]
) -> tuple[float, ...] | TokenDeficiency:
    """The logprobs as floats, or what is wrong with them."""
    try:
        raw = [entry["logprob"] for entry in content]
    except (KeyError, TypeError):
        return _logprob_problem(content)
    kinds = set(map(type, raw))  # C-speed checks: numbers only, and all finite (a NaN
    if not kinds <= _NUMBER_TYPES or not math.isfinite(sum(raw)):  # or inf poisons the sum)
        return _logprob_problem(content)
    values = tuple(raw) if kinds <= _FLOAT_ONLY else tuple(map(float, raw))
    if content:
        first = content[0].get("token")
        if type(first) is str and first.startswith(_TOKEN_ID_PREFIX):
            problem = _token_id_mismatch(content, completion_ids)
            if problem is not None:
                return problem
    return values


def _logprob_problem(content: list[Any]) -> TokenDeficiency:
    for index, entry in enumerate(content):
        where = f"choices[0].logprobs.content[{index}]"
        if not isinstance(entry, Mapping):
            return TokenDeficiency(f"an object at {where}")
        value = entry.get("logprob")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return TokenDeficiency(f"a number at {where}.logprob")
        if not math.isfinite(value):
            return TokenDeficiency(f"a finite logprob at {where}")
    return TokenDeficiency("usable logprobs at choices[0].logprobs.content")  # pragma: no cover


def _token_id_mismatch(
    content: list[Any], completion_ids: tuple[int, ...]
) -> TokenDeficiency | None:
    for index, (entry, token_id) in enumerate(zip(content, completion_ids, strict=True)):
        token = entry.get("token")
        if type(token) is str and token != f"{_TOKEN_ID_PREFIX}{token_id}":
            return TokenDeficiency(
                f"logprob tokens matching the completion ids (choices[0].logprobs.content"
                f"[{index}].token is {token!r}, completion id {token_id})"
            )
    return None
