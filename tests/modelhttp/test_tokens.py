"""Reading exact tokens from vLLM- and SGLang-shaped replies (benchmax._modelhttp.tokens)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmax._modelhttp.tokens import (
    TOKEN_REQUEST_FIELDS,
    CallTokens,
    TokenDeficiency,
    read_call_tokens,
)


def _content(logprobs: list[float], tokens: list[str] | None = None) -> list[dict[str, Any]]:
    names = tokens or ["x"] * len(logprobs)
    return [
        {"token": t, "logprob": lp, "bytes": [120], "top_logprobs": []}
        for t, lp in zip(names, logprobs, strict=True)
    ]


def vllm_reply(prompt: Any, completion: Any, logprobs: list[float]) -> dict[str, Any]:
    """As vLLM's ChatCompletionResponse.model_dump() with return_token_ids and logprobs."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "logprobs": {"content": _content(logprobs)},
                "finish_reason": "stop",
                "stop_reason": None,
                "token_ids": completion,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        "prompt_logprobs": None,
        "prompt_token_ids": prompt,
    }


def sglang_reply(prompt: list[int], completion: list[int], logprobs: list[float]) -> dict[str, Any]:
    """As SGLang's chat response with return_token_ids (ids per choice)."""
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "logprobs": {"content": _content(logprobs)},
                "finish_reason": "stop",
                "prompt_token_ids": prompt,
                "response_token_ids": completion,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def test_request_fields_ask_both_servers_for_ids_and_logprobs() -> None:
    assert dict(TOKEN_REQUEST_FIELDS) == {"logprobs": True, "return_token_ids": True}


def test_vllm_reply() -> None:
    tokens = read_call_tokens(vllm_reply([1, 2, 3], [7, 8], [-0.5, -1.25]))
    assert tokens == CallTokens((1, 2, 3), (7, 8), (-0.5, -1.25))


def test_sglang_reply() -> None:
    tokens = read_call_tokens(sglang_reply([1, 2], [9], [-0.1]))
    assert tokens == CallTokens((1, 2), (9,), (-0.1,))


def test_sglang_extension_ids() -> None:
    body = sglang_reply([0], [0], [-0.1])
    del body["choices"][0]["prompt_token_ids"], body["choices"][0]["response_token_ids"]
    body["sglext"] = {"input_ids": [4, 5], "output_ids": [[6]]}
    assert read_call_tokens(body) == CallTokens((4, 5), (6,), (-0.1,))


def test_completion_ids_from_token_id_strings() -> None:
    body = vllm_reply([1], None, [-0.25, -0.5])
    body["choices"][0]["logprobs"]["content"] = _content(
        [-0.25, -0.5], ["token_id:42", "token_id:2"]
    )
    assert read_call_tokens(body) == CallTokens((1,), (42, 2), (-0.25, -0.5))


def test_token_id_strings_must_match_the_id_list() -> None:
    body = vllm_reply([1], [42, 3], [-0.25, -0.5])
    body["choices"][0]["logprobs"]["content"] = _content(
        [-0.25, -0.5], ["token_id:42", "token_id:2"]
    )
    found = read_call_tokens(body)
    assert isinstance(found, TokenDeficiency)
    assert "content[1].token is 'token_id:2', completion id 3" in found.message


def test_logprobs_are_kept_as_sent() -> None:
    tokens = read_call_tokens(vllm_reply([1, 2], [2, 3], [-0.123456789, -9999]))
    assert isinstance(tokens, CallTokens)
    assert tokens.completion_logprobs == (-0.123456789, -9999.0)
    assert all(type(value) is float for value in tokens.completion_logprobs)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda b: b.pop("prompt_token_ids"), "prompt token ids"),
        (lambda b: b["choices"][0].pop("token_ids"), "completion token ids"),
        (lambda b: b["choices"][0].update(logprobs=None), "completion logprobs"),
        (lambda b: b["choices"][0].update(token_ids=[7]), "2 logprobs for 1 completion"),
        (lambda b: b["choices"][0].update(token_ids=[7, -1]), "completion token ids"),
        (lambda b: b["choices"][0].update(token_ids=[7, True]), "completion token ids"),
        (lambda b: b.update(prompt_token_ids="1 2"), "prompt token ids"),
        (lambda b: b["choices"][0]["logprobs"]["content"][1].update(logprob="x"), "a number"),
        (
            lambda b: b["choices"][0]["logprobs"]["content"][0].update(logprob=float("nan")),
            "a finite logprob",
        ),
        (
            lambda b: b["choices"][0]["logprobs"]["content"][1].update(logprob=float("-inf")),
            "a finite logprob",
        ),
        (lambda b: b["choices"][0]["logprobs"]["content"][1].update(logprob=True), "a number"),
        (lambda b: b["choices"][0]["logprobs"]["content"][1].pop("logprob"), "a number"),
        (lambda b: b["choices"][0]["logprobs"].update(content=[1, 2]), "an object at"),
        (lambda b: b.update(choices=[]), "choices[0]"),
    ],
)
def test_deficiencies_are_named(change: Any, named: str) -> None:
    body = vllm_reply([1, 2, 3], [7, 8], [-0.5, -1.25])
    change(body)
    found = read_call_tokens(body)
    assert isinstance(found, TokenDeficiency)
    assert named in found.message
    assert found.message.startswith("the reply lacked ")


def test_not_an_object() -> None:
    assert read_call_tokens([1]) == TokenDeficiency("a JSON object")


def test_call_tokens_checks_alignment() -> None:
    with pytest.raises(ValueError, match="2 entries for 1 completion tokens"):
        CallTokens((1,), (2,), (-0.1, -0.2))


@pytest.mark.parametrize(
    ("prompt", "kept"),
    [
        ([0, 1, 151_000], True),
        ([2**63 - 1, 10**18], True),  # 19 digits, under the bound: compared exactly
        ([1, 2**63], False),
        ([1, 2**64], False),  # past 64 bits
        ([1, -1], False),
        ([1, -0], True),  # -0 is the integer 0
        ([1, False], False),
        ([1, 1.0], False),
        ([1, 1e3], False),
        ([1, [2]], False),
        ([[1, 2]], False),
        ([1, "2"], False),
        ([1, None], False),
        ([1, {"id": 2}], False),
    ],
)
def test_prompt_ids_are_exactly_integers_in_bounds(prompt: list[object], kept: bool) -> None:
    found = read_call_tokens(vllm_reply(prompt, [7, 8], [-0.5, -1.25]))  # type: ignore[arg-type]
    if kept:
        assert isinstance(found, CallTokens) and found.prompt_token_ids == tuple(prompt)
    else:
        assert isinstance(found, TokenDeficiency) and "prompt token ids" in found.message
