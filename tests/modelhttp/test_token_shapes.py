"""Token data in every shape servers send it, and every bound (issue 28 kind 3):
``read_call_tokens`` reads or names the problem, and never raises on a JSON value."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax._modelhttp.tokens import CallTokens, TokenDeficiency, read_call_tokens

BOUND = 2**63


def reply(
    completion: Any = None,
    *,
    prompt: Any = (1, 2),
    entries: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat reply with ``prompt_token_ids`` and, when given, ``choices[0].token_ids``."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": "hi"},
        "finish_reason": "stop",
        "logprobs": {"content": entries if entries is not None else []},
    }
    if completion is not None:
        choice["token_ids"] = completion
    return {"choices": [choice], "prompt_token_ids": list(prompt)}


def entry(logprob: Any = -0.5, token: Any = "x", **extra: Any) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": [120], "top_logprobs": [], **extra}


def lacked(body: Any) -> str:
    found = read_call_tokens(body)
    assert isinstance(found, TokenDeficiency), found
    return found.message


# Ids each logprobs entry carries itself.


def test_integer_token_ids_on_each_entry_are_read() -> None:
    body = reply(entries=[entry(-0.25, token_id=42), entry(-0.5, token_id=0)])
    assert read_call_tokens(body) == CallTokens((1, 2), (42, 0), (-0.25, -0.5))


def test_llama_cpp_entries_carry_their_id_as_id() -> None:
    body = reply(entries=[entry(-0.25, token="Hi", id=9906), entry(-1.0, token="!", id=0)])
    assert read_call_tokens(body) == CallTokens((1, 2), (9906, 0), (-0.25, -1.0))


def test_an_entry_id_wins_over_its_token_string() -> None:
    body = reply(entries=[entry(-0.25, token="token_id:7", token_id=7)])
    assert read_call_tokens(body) == CallTokens((1, 2), (7,), (-0.25,))


def test_entry_ids_must_match_an_id_list_sent_beside_them() -> None:
    body = reply([5, 6], entries=[entry(-0.1, token_id=5), entry(-0.2, token_id=8)])
    assert "content[1].token_id is 8, completion id 6" in lacked(body)
    body = reply([5], entries=[entry(-0.1, id=4)])
    assert "content[0].id is 4, completion id 5" in lacked(body)
    body = reply([5, 6], entries=[entry(-0.1, token_id=5), entry(-0.2, token_id=6)])
    assert read_call_tokens(body) == CallTokens((1, 2), (5, 6), (-0.1, -0.2))


@pytest.mark.parametrize("given_id", ["42", 4.0, True, None, -1, BOUND, [1], {"id": 1}], ids=repr)
def test_an_entry_id_that_is_not_an_id_is_a_deficiency(given_id: Any) -> None:
    if given_id is None:  # no id and no token_id:N token: no completion ids at all
        body = reply(entries=[entry(-0.1, token_id=None)])
        assert "completion token ids" in lacked(body)
        return
    body = reply(entries=[entry(-0.1, token_id=given_id)])
    assert "completion token ids" in lacked(body)


def test_entries_without_ids_and_without_an_id_list_are_a_deficiency() -> None:
    assert "completion token ids" in lacked(reply(entries=[entry(-0.1), "no object"]))


# token_id:N strings (vLLM's return_tokens_as_token_ids).


@pytest.mark.parametrize(
    "token",
    [
        "token_id:²",  # str.isdigit() accepts it, int() does not
        "token_id:٣",  # an Arabic-Indic digit: int() accepts it, it is no id a server writes
        "token_id:",
        "token_id:+5",
        "token_id:-5",
        "token_id: 5",
        "token_id:5 ",
        "token_id:0x1f",
        "token_id:1_000",
        "token_id:" + "9" * 5000,  # longer than any id, and than int()'s digit limit
        "token_id:9223372036854775808",  # 2**63
        "token_id:99999999999999999999",
    ],
)
def test_a_token_id_string_that_is_not_an_ascii_id_is_a_deficiency(token: str) -> None:
    body = reply(entries=[entry(-0.1, token="token_id:3"), entry(-0.2, token=token)])
    assert "completion token ids" in lacked(body)


def test_the_largest_int64_id_is_read() -> None:
    body = reply(entries=[entry(-0.1, token=f"token_id:{BOUND - 1}")], prompt=[BOUND - 1])
    assert read_call_tokens(body) == CallTokens((BOUND - 1,), (BOUND - 1,), (-0.1,))


# Bounds of ids and logprobs.


@pytest.mark.parametrize("where", ["prompt", "completion", "sglang", "entry"])
def test_ids_of_2_to_the_63_or_more_are_refused(where: str) -> None:
    huge = [3, BOUND]
    if where == "prompt":
        body, named = reply([3], prompt=huge, entries=[entry()]), "prompt token ids"
    elif where == "completion":
        body, named = reply(huge, entries=[entry(), entry()]), "completion token ids"
    elif where == "sglang":
        body = reply(entries=[entry(), entry()])
        body["choices"][0]["response_token_ids"] = [3, 2**64 + 5]
        named = "completion token ids"
    else:
        body = reply(entries=[entry(token_id=3), entry(token_id=BOUND)])
        named = "completion token ids"
    message = lacked(body)
    assert named in message
    assert "item 1 is" in message and "outside [0, 2**63)" in message


@pytest.mark.parametrize(
    ("logprob", "named"),
    [
        (0.5, "a logprob <= 0 at choices[0].logprobs.content[1] (got 0.5"),
        (1e-300, "a logprob <= 0"),
        (3, "a logprob <= 0"),
        (float("nan"), "a finite logprob at choices[0].logprobs.content[1]"),
        (float("inf"), "a finite logprob"),
        (float("-inf"), "a finite logprob"),
        (10**400, "a finite logprob"),  # an integer no float holds
        (-(10**400), "a finite logprob"),
        ("-0.5", "a number at choices[0].logprobs.content[1].logprob"),
        (None, "a number"),
        (False, "a number"),
    ],
    ids=repr,
)
def test_logprobs_must_be_finite_and_never_positive(logprob: Any, named: str) -> None:
    body = reply([7, 8], entries=[entry(-0.25), entry(logprob)])
    assert named in lacked(body)


def test_zero_and_vllms_placeholder_are_logprobs() -> None:
    body = reply([7, 8, 9], entries=[entry(0.0), entry(-0.0), entry(-9999)])
    tokens = read_call_tokens(body)
    assert tokens == CallTokens((1, 2), (7, 8, 9), (0.0, -0.0, -9999.0))


def test_the_stdlib_decoder_s_big_numbers_are_deficiencies() -> None:
    """orjson refuses numbers out of double range, so such a body is decoded by ``json``
    (benchmax._modelhttp.json_codec) and reaches the reader as huge ints and inf."""
    raw = (
        '{"prompt_token_ids": [1], "choices": [{"token_ids": [2],'
        ' "logprobs": {"content": [{"token": "x", "logprob": -1e999}]}}]}'
    )
    assert "a finite logprob" in lacked(json.loads(raw))


# Never raises, whatever JSON arrives.

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["token_id:1", "token_id:²", "token_id:-1", "token_id:" + "1" * 30, "x"])
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["token", "logprob", "token_id", "id", "content", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_id_lists = st.none() | _json | st.lists(_scalars, max_size=4)
_entries = st.lists(
    st.fixed_dictionaries(
        {}, optional={"token": _scalars, "logprob": _scalars, "token_id": _scalars, "id": _scalars}
    )
    | _json,
    max_size=4,
)


@given(prompt=_id_lists, completion=_id_lists, entries=_entries, extra=_json)
def test_any_json_reply_is_read_or_named_never_raised(
    prompt: Any, completion: Any, entries: Any, extra: Any
) -> None:
    choice = {"logprobs": {"content": entries}, "token_ids": completion, "extra": extra}
    body = {"prompt_token_ids": prompt, "choices": [choice], "sglext": extra}
    found = read_call_tokens(body)
    if isinstance(found, CallTokens):
        ids = found.prompt_token_ids + found.completion_token_ids
        assert all(type(i) is int and 0 <= i < BOUND for i in ids)
        assert all(type(x) is float and x <= 0.0 for x in found.completion_logprobs)
    else:
        assert found.message.startswith("the reply lacked ")
