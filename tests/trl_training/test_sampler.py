"""The embedded sampler (``benchmax.training.PolicySampler``) against real HTTP on 127.0.0.1.

A tiny random Qwen2 (``tiny_policy``) serves chat completions; every check reads the reply
as benchmax reads it (``benchmax._modelhttp.tokens.read_call_tokens``) and scores the
sampled tokens with the same weights. Run with ``uv run --group trl pytest -m trl``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pytest

pytest.importorskip("transformers")

import httpx
import torch
from tests.trl_training.tiny_policy import build_model, build_tokenizer, calculator_grammar

from benchmax._modelhttp.overflow import is_context_overflow
from benchmax._modelhttp.tokens import CallTokens, read_call_tokens
from benchmax.training import PolicySampler
from benchmax.training._decoding import BatchDecoder, Sampled, SamplingParams

pytestmark = pytest.mark.trl

TOKENIZER = build_tokenizer()
QUESTION = [{"role": "user", "content": "Compute (12 + 7) * 3 using the tools."}]
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("add", "multiply")
]
ALL_AT_ONCE = 60.0  # gather for up to this long: a wave starts when the batch is full


def _body(**fields: Any) -> dict[str, Any]:
    return {
        "model": "policy",
        "messages": QUESTION,
        "max_tokens": 12,
        "logprobs": True,
        "return_token_ids": True,
        **fields,
    }


async def _post(url: str, bodies: Sequence[dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=120) as client:
        return list(
            await asyncio.gather(*(client.post(f"{url}/chat/completions", json=b) for b in bodies))
        )


def _tokens(reply: httpx.Response) -> CallTokens:
    assert reply.status_code == 200, reply.text
    tokens = read_call_tokens(reply.json())
    assert isinstance(tokens, CallTokens), tokens
    return tokens


def _own_logprobs(model: torch.nn.Module, tokens: CallTokens) -> list[float]:
    prompt, sampled = list(tokens.prompt_token_ids), list(tokens.completion_token_ids)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + sampled])).logits[0].float()
    scores = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return scores[torch.arange(len(sampled)), torch.tensor(sampled)].tolist()


def test_concurrent_requests_are_decoded_as_one_batch_with_exact_logprobs() -> None:
    model = build_model(TOKENIZER)
    model.train()
    # Prompts of different lengths: rows are left-padded inside the batch.
    questions = [
        [{"role": "user", "content": "Compute (12 + 7) * 3" + " please" * i}] for i in range(6)
    ]
    bodies = [_body(messages=q, seed=i, max_tokens=4 + i) for i, q in enumerate(questions)]
    with PolicySampler(model, TOKENIZER, max_batch_size=6, gather_seconds=ALL_AT_ONCE) as sampler:
        replies = asyncio.run(_post(sampler.base_url, bodies))
        stats = sampler.stats
    assert (stats.prefills, stats.rows, stats.joins) == (1, 6, 0)
    assert model.training  # the mode is restored after sampling
    assert all(p.grad is None for p in model.parameters())
    for i, reply in enumerate(replies):
        tokens = _tokens(reply)
        body = reply.json()
        assert len(tokens.completion_token_ids) == 4 + i  # no EOS from a random model this soon
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"] == {
            "prompt_tokens": len(tokens.prompt_token_ids),
            "completion_tokens": 4 + i,
            "total_tokens": len(tokens.prompt_token_ids) + 4 + i,
        }
        text = TOKENIZER.apply_chat_template(
            questions[i], add_generation_prompt=True, tokenize=False
        )
        assert list(tokens.prompt_token_ids) == TOKENIZER.encode(text, add_special_tokens=False)
        model.eval()
        assert _own_logprobs(model, tokens) == pytest.approx(tokens.completion_logprobs, abs=1e-4)


def test_a_seed_reproduces_a_request_alone_or_in_a_batch() -> None:
    model = build_model(TOKENIZER)
    with PolicySampler(model, TOKENIZER, max_batch_size=4, gather_seconds=ALL_AT_ONCE) as sampler:
        batched = asyncio.run(_post(sampler.base_url, [_body(seed=s) for s in (1, 2, 3, 1)]))
    with PolicySampler(model, TOKENIZER, max_batch_size=1) as sampler:
        (alone,) = asyncio.run(_post(sampler.base_url, [_body(seed=1)]))
        other_prompt = [{"role": "user", "content": "Compute (1 + 2) * 3 using the tools."}]
        (moved,) = asyncio.run(_post(sampler.base_url, [_body(seed=1, messages=other_prompt)]))
    ids = [_tokens(reply).completion_token_ids for reply in batched]
    assert ids[0] == ids[3] == _tokens(alone).completion_token_ids
    assert len(set(ids[:3])) == 3
    # The same seed on another prompt (the next turn of a conversation) draws afresh.
    assert _tokens(moved).completion_token_ids != ids[0]


def test_greedy_top_k_1_and_a_tiny_top_p_agree() -> None:
    model = build_model(TOKENIZER)
    bodies = [
        _body(temperature=0),
        _body(top_k=1, seed=5),
        _body(top_p=1e-9, seed=6),
        _body(temperature=0.5, top_k=1, top_p=0.5, seed=7),
    ]
    with PolicySampler(model, TOKENIZER) as sampler:
        replies = asyncio.run(_post(sampler.base_url, bodies))
    ids = [_tokens(reply).completion_token_ids for reply in replies]
    assert len(set(ids)) == 1
    # The reported logprobs are the raw distribution's, not the truncated one's (< 0).
    assert all(lp < 0 for lp in _tokens(replies[1]).completion_logprobs)


def _forced(text: str, eos: int) -> Any:
    target = [*TOKENIZER.encode(text, add_special_tokens=False), eos]

    def allowed(ids: Sequence[int]) -> Sequence[int] | None:
        return [target[len(ids)]] if len(ids) < len(target) else None

    return allowed


def test_eos_stop_strings_and_stop_tokens_end_a_completion() -> None:
    model = build_model(TOKENIZER)
    eos = TOKENIZER.eos_token_id
    forced = _forced("The result is <answer>57</answer>.", eos)
    answer = TOKENIZER.convert_tokens_to_ids("<answer>")
    with PolicySampler(model, TOKENIZER, allowed_tokens=forced) as sampler:
        replies = asyncio.run(
            _post(
                sampler.base_url,
                [
                    _body(max_tokens=50),
                    _body(max_tokens=50, stop=["</answer>", "nothing"]),
                    _body(max_tokens=50, stop_token_ids=[answer]),
                    _body(max_tokens=3),
                ],
            )
        )
    bodies = [reply.json()["choices"][0] for reply in replies]
    assert [b["finish_reason"] for b in bodies] == ["stop", "stop", "stop", "length"]
    assert [b["stop_reason"] for b in bodies] == [None, "</answer>", answer, None]
    assert bodies[0]["message"]["content"] == "The result is <answer>57</answer>."
    assert bodies[0]["token_ids"][-1] == eos  # the EOS is sampled, reported, not in the text
    assert bodies[1]["message"]["content"] == "The result is <answer>57"
    assert bodies[2]["token_ids"][-1] == answer
    assert len(bodies[3]["token_ids"]) == 3


def test_tool_calls_are_parsed_hermes_style_when_tools_are_offered() -> None:
    model = build_model(TOKENIZER)
    grammar = calculator_grammar(TOKENIZER)
    tool_start = TOKENIZER.convert_tokens_to_ids("<tool_call>")

    def always_a_tool(ids: Sequence[int]) -> Sequence[int] | None:
        return [tool_start] if not ids else grammar(ids)

    with PolicySampler(model, TOKENIZER, allowed_tokens=always_a_tool) as sampler:
        with_tools, without = asyncio.run(
            _post(
                sampler.base_url,
                [_body(max_tokens=60, tools=TOOLS, seed=2), _body(max_tokens=60, seed=2)],
            )
        )
        # The same call cut by max_tokens just before its EOS: parsed, but "length".
        whole = len(with_tools.json()["choices"][0]["token_ids"])
        (cut,) = asyncio.run(
            _post(sampler.base_url, [_body(max_tokens=whole - 1, tools=TOOLS, seed=2)])
        )
    cut_choice = cut.json()["choices"][0]
    assert cut_choice["finish_reason"] == "length" and cut_choice["message"]["tool_calls"]
    choice = with_tools.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] in ("add", "multiply")
    arguments = call["function"]["arguments"]
    assert arguments.startswith('{"a": ') and arguments.endswith("}")
    # The template renders the call back as exactly the sampled tokens (prefix-stable).
    sampled = list(choice["token_ids"])
    turn = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call]}]
    rendered = TOKENIZER.apply_chat_template(turn, tools=TOOLS, tokenize=False)
    assert TOKENIZER.encode(rendered, add_special_tokens=False)[-len(sampled) - 1 : -1] == sampled
    # Without tools in the request the text stays content.
    plain = without.json()["choices"][0]
    assert plain["finish_reason"] == "stop" and "<tool_call>" in plain["message"]["content"]


def test_bad_requests_get_one_clear_error_each() -> None:
    model = build_model(TOKENIZER)
    cases = [
        (_body(model="other"), 404, "The model `other` does not exist"),
        (_body(temperature=-1), 400, "temperature must be in [0, inf]"),
        (_body(top_p=0), 400, "top_p must be in (0, 1]"),
        (_body(max_tokens=0), 400, "max_tokens must be a positive integer"),
        (_body(n=2), 400, "n must be 1"),
        (_body(stream=True), 400, "stream is not supported"),
        (_body(stop=[1]), 400, "stop must be"),
        (_body(seed="x"), 400, "seed must be an integer"),
        (_body(messages=[]), 400, "messages must be a non-empty list"),
        (_body(messages=[{"content": "no role"}]), 400, "messages[0] must be an object"),
    ]
    with PolicySampler(model, TOKENIZER, max_model_len=40) as sampler:
        replies = asyncio.run(_post(sampler.base_url, [body for body, _, _ in cases]))
        (overflow,) = asyncio.run(_post(sampler.base_url, [_body(max_tokens=30)]))
        not_json = httpx.post(f"{sampler.base_url}/chat/completions", content=b"{", timeout=60)
    for (_, status, message), reply in zip(cases, replies, strict=True):
        assert reply.status_code == status
        assert message in reply.json()["error"]["message"]
    # benchmax reads the overflow as context_exceeded (vLLM's words).
    assert overflow.status_code == 400
    assert is_context_overflow(400, overflow.json()["error"])
    assert "maximum context length is 40 tokens" in overflow.json()["error"]["message"]
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]


def test_models_tokenize_weights_version_and_close() -> None:
    model = build_model(TOKENIZER)
    sampler = PolicySampler(model, TOKENIZER, model_name="tiny")
    with pytest.raises(RuntimeError, match="not started"):
        sampler.base_url  # noqa: B018
    with sampler:
        root = sampler.base_url.removesuffix("/v1")
        models = httpx.get(f"{sampler.base_url}/models", timeout=60).json()
        tokenized = httpx.post(f"{root}/tokenize", json={"messages": QUESTION}, timeout=60).json()
        first = httpx.post(f"{sampler.base_url}/chat/completions", json=_body(model="tiny"))
        assert sampler.weights_version == 0
        sampler.weights_updated()
        second = httpx.post(f"{sampler.base_url}/chat/completions", json=_body(model="tiny"))
        with pytest.raises(RuntimeError, match="already started"):
            sampler.start()
    sampler.close()  # idempotent
    assert [m["id"] for m in models["data"]] == ["tiny"]
    assert tokenized["tokens"] == list(_tokens(first).prompt_token_ids)
    assert tokenized["count"] == len(tokenized["tokens"])
    assert (first.json()["weights_version"], second.json()["weights_version"]) == (0, 1)
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{sampler.base_url}/chat/completions", json=_body(model="tiny"), timeout=5)
    for bad in (0, True):
        with pytest.raises(ValueError, match="max_batch_size"):
            PolicySampler(model, TOKENIZER, max_batch_size=bad)
    with pytest.raises(ValueError, match="max_model_len"):
        PolicySampler(model, TOKENIZER, max_model_len=0)


def test_requests_arriving_mid_generation_join_the_running_batch() -> None:
    model = build_model(TOKENIZER)
    model.eval()
    long_prompt = TOKENIZER.encode("Compute (12 + 7) * 3 using the tools. " * 3)
    short_prompts = [TOKENIZER.encode("Compute (1 + 2) * 3"), TOKENIZER.encode("What?")]
    joined: list[Future[Sampled]] = []
    decoder: BatchDecoder | None = None

    def join_later(ids: Sequence[int]) -> None:
        # Called on the sampling thread at every step: when the first row has 2 and then
        # 5 tokens, queue one more request; it joins at the next step boundary.
        assert decoder is not None
        if len(ids) in (2, 5) and len(joined) < (1 if len(ids) == 2 else 2):
            prompt = short_prompts[len(joined)]
            joined.append(decoder.submit(prompt, SamplingParams(max_tokens=9, seed=3)))
        return None

    decoder = BatchDecoder(
        model,
        TOKENIZER,
        version=lambda: 0,
        max_batch_size=8,
        max_model_len=2048,
        allowed_tokens=join_later,
    )
    try:
        first = decoder.submit(long_prompt, SamplingParams(max_tokens=7, seed=1)).result(60)
        later = [future.result(60) for future in joined]
        stats = decoder.stats
    finally:
        decoder.close()
    assert (stats.prefills, stats.joins) == (3, 2)
    assert stats.mean_batch > 1
    for sampled in (first, *later):
        tokens = CallTokens(sampled.prompt_ids, sampled.completion_ids, sampled.logprobs)
        assert _own_logprobs(model, tokens) == pytest.approx(sampled.logprobs, abs=1e-4)
    # Joining changed nothing: alone, the same request samples the same tokens.
    alone = BatchDecoder(model, TOKENIZER, version=lambda: 0, max_batch_size=1, max_model_len=2048)
    try:
        again = alone.submit(short_prompts[0], SamplingParams(max_tokens=9, seed=3)).result(60)
    finally:
        alone.close()
    assert again.completion_ids == later[0].completion_ids


def test_a_sequence_budget_cuts_replies_and_refuses_a_full_prompt() -> None:
    """``max_sequence_tokens``: a reply stops where prompt + completion reach the budget
    (``length``); a prompt that fills it gets the context-overflow 400 benchmax reads as
    ``context_exceeded``."""
    torch.manual_seed(0)
    model = build_model(TOKENIZER)
    rendered = TOKENIZER.apply_chat_template(QUESTION, add_generation_prompt=True, return_dict=True)
    prompt = len(rendered["input_ids"])
    with PolicySampler(model, TOKENIZER, max_sequence_tokens=prompt + 3) as sampler:
        cut, full = asyncio.run(_post(sampler.base_url, [_body(ignore_eos=True, seed=1), _body()]))
    with PolicySampler(model, TOKENIZER, max_sequence_tokens=prompt) as sampler:
        (refused,) = asyncio.run(_post(sampler.base_url, [_body()]))
    tokens = _tokens(cut)
    assert len(tokens.prompt_token_ids) == prompt and len(tokens.completion_token_ids) == 3
    assert cut.json()["choices"][0]["finish_reason"] == "length"
    assert len(_tokens(full).completion_token_ids) <= 3
    assert refused.status_code == 400
    assert is_context_overflow(400, refused.json()["error"])
    assert "--max-sequence-tokens" in refused.json()["error"]["message"]
    with pytest.raises(ValueError, match="max_sequence_tokens must be a positive integer"):
        PolicySampler(model, TOKENIZER, max_sequence_tokens=0)
