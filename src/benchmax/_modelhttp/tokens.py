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
  (SGLang), ``sglext.output_ids[0]``, else per logprobs entry its integer ``token_id``
  (or ``id``, as llama.cpp's server writes it), else its ``token_id:N`` string (ASCII
  digits only); ids an entry carries must match an id list sent beside them;
* completion logprobs: ``choices[0].logprobs.content[j].logprob``, exactly one per
  completion id (vLLM writes ``-9999.0`` where it had none; kept as sent).

Bounds: every id is an integer in ``[0, 2**63)`` (``TOKEN_ID_BOUND``: an ``int64``
holds it), every logprob a finite number ``<= 0``; a reply outside them is a
:class:`TokenDeficiency` (the rollout's ``model_error``), never an exception.

vLLM omits the ids and the logprobs when a reasoning parser runs with
``include_reasoning: false``; such a reply is a :class:`TokenDeficiency` like any other
reply without them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import orjson

from benchmax._value_checks import TOKEN_ID_BOUND, is_finite_number

__all__ = [
    "TOKEN_REQUEST_FIELDS",
    "CallTokens",
    "TokenDeficiency",
    "read_call_tokens",
]

TOKEN_REQUEST_FIELDS: Final[Mapping[str, object]] = MappingProxyType(
    {"logprobs": True, "return_token_ids": True}
)
"""Body fields asking vLLM and SGLang for the prompt ids, completion ids and logprobs."""

_TOKEN_ID_PREFIX: Final = "token_id:"
_ID_DIGITS: Final = len(str(TOKEN_ID_BOUND))
"""At most this many digits in a ``token_id:N`` string (longer cannot be in bounds, and
``int()`` of a huge digit string is slow or refused)."""
_DIGITS_AS_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER: Final = b"0" * len(str(TOKEN_ID_BOUND))
_FLOAT_ONLY: Final = {float}
_OBJECT: Final = (dict, Mapping)
"""What a JSON object is: a dict (decoded JSON's own type, checked first: an ABC's
``isinstance`` costs more than the rest of a check) or any other mapping."""
_LOGPROB: Final = operator.itemgetter("logprob")
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
    reply lacked: a missing source, ids that are not integers in ``[0, 2**63)``, logprobs
    that are not finite numbers ``<= 0``, or logprobs whose count (or the ids their
    entries carry) does not match the completion ids. Never raises on a JSON value."""
    if not isinstance(body, _OBJECT):
        return TokenDeficiency("a JSON object")
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, _OBJECT):
        return TokenDeficiency("choices[0]")
    sglext = body.get("sglext")
    if not isinstance(sglext, _OBJECT):
        sglext = {}
    prompt = body.get("prompt_token_ids")
    if prompt is None:
        prompt = choice.get("prompt_token_ids")
    if prompt is None:
        prompt = sglext.get("input_ids")
    prompt_ids = _ids(prompt)
    if prompt_ids is None:
        return TokenDeficiency(_PROMPT_IDS + _id_problem(prompt))
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, _OBJECT) else None
    if not isinstance(content, list):
        return TokenDeficiency(_LOGPROBS)
    completion = choice.get("token_ids")
    if completion is None:
        completion = choice.get("response_token_ids")
    if completion is None:
        outputs = sglext.get("output_ids")
        if isinstance(outputs, list) and outputs:
            completion = outputs[0]
    listed = completion is not None
    if not listed:
        completion = _ids_from_logprob_entries(content)
    completion_ids = _ids(completion)
    if completion_ids is None:
        return TokenDeficiency(_COMPLETION_IDS + _id_problem(completion))
    if len(content) != len(completion_ids):
        return TokenDeficiency(
            f"one logprob per completion token ({len(content)} logprobs for"
            f" {len(completion_ids)} completion token ids)"
        )
    values = _logprobs(content)
    if isinstance(values, TokenDeficiency):
        return values
    if listed and content and _carries_ids(content[0]):
        problem = _token_id_mismatch(content, completion_ids)
        if problem is not None:
            return problem
    return CallTokens(prompt_ids, completion_ids, values)


def _ids(value: object) -> tuple[int, ...] | None:
    """``value`` as a tuple of token ids, or ``None`` when it is not a list of integers in
    ``[0, TOKEN_ID_BOUND)``.

    Checked on its JSON text, at a few nanoseconds an id (a prompt may hold thousands):
    ``orjson`` writes a list of non-negative integers as digits and commas only (a bool as
    ``true``, a float with ``.`` or ``e``, a negative number with ``-``, a nested list with
    brackets); a number of 19 digits or more may pass ``2**63`` and is compared exactly.
    (An ``int`` subclass, which decoded JSON never holds, counts as its integer.)"""
    if type(value) is not list:
        return None
    if not value:
        return ()
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:  # past 64 bits, or not JSON at all
        return None
    digits = text.translate(_DIGITS_AS_ZERO)
    if digits.translate(None, b"0,") != b"[]":
        return None
    if _LONG_NUMBER in digits and max(value) >= TOKEN_ID_BOUND:
        return None
    return tuple(value)


def _id_problem(value: object) -> str:
    """What makes ``value`` (refused by :func:`_ids`) not a list of token ids, as a
    suffix for the deficiency (``""`` when it is not a list at all)."""
    if type(value) is not list:
        return ""
    for index, item in enumerate(value):
        if type(item) is not int:
            return f"; item {index} is {_short(item)}, not an integer"
        if not 0 <= item < TOKEN_ID_BOUND:
            return f"; item {index} is {_short(item)}, outside [0, 2**63)"
    return ""  # pragma: no cover - _ids refused it, so some item is wrong


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _entry_id(entry: Mapping[str, object]) -> object:
    """The integer id a logprobs entry carries itself (``token_id``, llama.cpp's ``id``),
    or ``None``."""
    given = entry.get("token_id")
    return entry.get("id") if given is None else given


def _carries_ids(entry: object) -> bool:
    if not isinstance(entry, _OBJECT):
        return False
    token = entry.get("token")
    return _entry_id(entry) is not None or (
        type(token) is str and token.startswith(_TOKEN_ID_PREFIX)
    )


def _ids_from_logprob_entries(content: list[object]) -> list[object] | None:
    """The completion ids the logprobs entries carry (their ``token_id``/``id``, else
    their ``token_id:N`` token), unchecked (``_ids`` checks them), or ``None`` when an
    entry carries none."""
    ids: list[object] = []
    for entry in content:
        if not isinstance(entry, _OBJECT):
            return None
        given = _entry_id(entry)
        if given is not None:
            ids.append(given)
            continue
        number = _token_id_number(entry.get("token"))
        if number is None:
            return None
        ids.append(number)
    return ids


def _token_id_number(token: object) -> int | None:
    """N of a ``token_id:N`` token: ASCII digits only (``str.isdigit`` also accepts
    ``²`` and other digits ``int`` refuses), at most ``_ID_DIGITS`` of them."""
    if type(token) is not str or not token.startswith(_TOKEN_ID_PREFIX):
        return None
    number = token[len(_TOKEN_ID_PREFIX) :]
    if not (0 < len(number) <= _ID_DIGITS and number.isascii() and number.isdigit()):
        return None
    return int(number)


def _logprobs(content: list[Any]) -> tuple[float, ...] | TokenDeficiency:
    """The logprobs as floats, or what is wrong with them."""
    try:
        raw = list(map(_LOGPROB, content))
    except (KeyError, TypeError):
        return _logprob_problem(content)
    kinds = set(map(type, raw))  # C-speed checks: numbers only, finite, never above 0
    if not kinds <= _NUMBER_TYPES:
        return _logprob_problem(content)
    try:
        values = tuple(raw) if kinds <= _FLOAT_ONLY else tuple(map(float, raw))
    except OverflowError:  # an integer too large for a float
        return _logprob_problem(content)
    if values and (not all(map(math.isfinite, values)) or max(values) > 0.0):
        return _logprob_problem(content)
    return values


def _logprob_problem(content: list[object]) -> TokenDeficiency:
    for index, entry in enumerate(content):
        where = f"choices[0].logprobs.content[{index}]"
        if not isinstance(entry, _OBJECT):
            return TokenDeficiency(f"an object at {where}")
        value = entry.get("logprob")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return TokenDeficiency(f"a number at {where}.logprob")
        if not is_finite_number(value):
            return TokenDeficiency(f"a finite logprob at {where}")
        if value > 0:
            return TokenDeficiency(
                f"a logprob <= 0 at {where} (got {_short(value)}; a log-probability is"
                " never positive)"
            )
    return TokenDeficiency("usable logprobs at choices[0].logprobs.content")  # pragma: no cover


def _token_id_mismatch(
    content: list[object], completion_ids: tuple[int, ...]
) -> TokenDeficiency | None:
    for index, (entry, token_id) in enumerate(zip(content, completion_ids, strict=True)):
        if not isinstance(entry, _OBJECT):
            continue
        where = f"choices[0].logprobs.content[{index}]"
        given = _entry_id(entry)
        if given is not None and given != token_id:
            key = "token_id" if entry.get("token_id") is not None else "id"
            return TokenDeficiency(
                f"logprob entries matching the completion ids ({where}.{key} is"
                f" {_short(given)}, completion id {token_id})"
            )
        token = entry.get("token")
        if (
            given is None
            and type(token) is str
            and token.startswith(_TOKEN_ID_PREFIX)
            and token != f"{_TOKEN_ID_PREFIX}{token_id}"
        ):
            return TokenDeficiency(
                f"logprob tokens matching the completion ids ({where}.token is"
                f" {_short(token)}, completion id {token_id})"
            )
    return None
