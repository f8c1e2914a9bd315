"""MockModelServer's token mode: toy tokenizer, ChatML/Qwen3 templates, vLLM-shaped replies."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from benchmax._modelhttp.tokens import CallTokens, read_call_tokens
from benchmax.testing import SPECIAL_TOKENS, MockModelServer, ToyChatTemplate, scripted

ASK = {"logprobs": True, "return_token_ids": True}
USER = {"role": "user", "content": "hi"}


async def _post(server: MockModelServer, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        reply = await client.post(f"{server.base_url}/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def test_toy_tokenizer_round_trips() -> None:
    template = ToyChatTemplate()
    text = "héllo, 世界\n"
    assert template.decode(template.encode(text)) == text
    assert template.encode("a") == [100 + ord("a")]
    assert template.decode([SPECIAL_TOKENS["<think>"]]) == "<think>"


def test_chatml_prompt() -> None:
    template = ToyChatTemplate()
    ids = template.prompt_ids([{"role": "system", "content": "s"}, USER])
    assert template.decode(ids) == (
        "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_qwen3_template_drops_reasoning_before_the_last_user_message() -> None:
    earlier = {"role": "assistant", "content": "a", "reasoning_content": "r1"}
    later = {"role": "assistant", "content": "b", "reasoning_content": "r2"}
    tool = {"role": "tool", "tool_call_id": "c", "content": "t"}
    messages = [USER, earlier, USER, later, tool]
    qwen3 = ToyChatTemplate("qwen3").decode(ToyChatTemplate("qwen3").prompt_ids(messages))
    chatml = ToyChatTemplate().decode(ToyChatTemplate().prompt_ids(messages))
    assert "<think>r1</think>" in chatml and "<think>r1</think>" not in qwen3
    assert "<think>r2</think>" in qwen3  # after the last user message: kept


def test_unknown_template_is_refused() -> None:
    with pytest.raises(ValueError, match="chat_template must be one of chatml, qwen3"):
        MockModelServer(tokens=True, chat_template="llama")  # type: ignore[arg-type]


async def test_reply_is_shaped_as_vllms() -> None:
    async with MockModelServer(scripted(["ok"]), tokens=True) as server:
        body = await _post(server, {"model": "m", "messages": [USER], **ASK})
    template = ToyChatTemplate()
    choice = body["choices"][0]
    assert list(body) == [
        "id", "object", "created", "model", "choices", "service_tier", "system_fingerprint",
        "usage", "prompt_logprobs", "prompt_token_ids", "kv_transfer_params",
    ]  # fmt: skip
    assert choice["token_ids"] == [*template.encode("ok"), SPECIAL_TOKENS["<|im_end|>"]]
    assert body["prompt_token_ids"] == template.prompt_ids([USER])
    entries = choice["logprobs"]["content"]
    assert [e["token"] for e in entries] == ["o", "k", "<|im_end|>"]
    assert all(-8 < e["logprob"] <= 0 and e["top_logprobs"] == [] for e in entries)
    assert body["usage"]["completion_tokens"] == 3
    assert body["usage"]["prompt_tokens"] == len(body["prompt_token_ids"])
    assert isinstance(read_call_tokens(body), CallTokens)


async def test_token_fields_only_on_request() -> None:
    async with MockModelServer(scripted(["ok"], when_exhausted="repeat_last"), tokens=True) as s:
        plain = await _post(s, {"model": "m", "messages": [USER]})
        ids_only = await _post(s, {"model": "m", "messages": [USER], "return_token_ids": True})
        as_ids = await _post(
            s,
            {
                "model": "m",
                "messages": [USER],
                "logprobs": True,
                "return_tokens_as_token_ids": True,
            },
        )
    assert plain["prompt_token_ids"] is None and plain["choices"][0]["token_ids"] is None
    assert plain["choices"][0]["logprobs"] is None
    assert ids_only["choices"][0]["logprobs"] is None and ids_only["prompt_token_ids"]
    tokens = [e["token"] for e in as_ids["choices"][0]["logprobs"]["content"]]
    assert tokens == [f"token_id:{i}" for i in ToyChatTemplate().completion_ids({"content": "ok"})]
    assert as_ids["choices"][0]["token_ids"] is None


async def test_replies_are_deterministic() -> None:
    body = {"model": "m", "messages": [USER], **ASK}
    async with MockModelServer(scripted(["ok"], when_exhausted="repeat_last"), tokens=True) as s:
        first, second = await _post(s, body), await _post(s, body)
    assert first["choices"] == second["choices"]


async def test_without_token_mode_replies_are_unchanged() -> None:
    async with MockModelServer(scripted(["ok"])) as server:
        body = await _post(server, {"model": "m", "messages": [USER], **ASK})
    assert "prompt_token_ids" not in body and "token_ids" not in body["choices"][0]
