"""Training samples from real rollouts against the mock server's token mode: every sampled
token once with mask 1, environment tokens with mask 0, template breaks counted, and the
stitched samples equal the server's own token stream (a property over random
multi-turn tool conversations)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.envs.base.support import ToolEnv, make_request, tool_reply

from benchmax._modelhttp.tokens import CallTokens, read_call_tokens
from benchmax.testing import MockModelServer, ToyChatTemplate, scripted
from benchmax.testing._tokens import toy_logprob
from benchmax.training import collect_group, to_training_samples
from benchmax.trajectory import ModelCall, Trajectory

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
CALL = st.fixed_dictionaries({"left": st.integers(-99, 99), "right": st.integers(-99, 99)}).map(
    lambda arguments: {"name": "multiply", "arguments": arguments}
)
TURN = st.fixed_dictionaries(
    {"content": st.none() | TEXT, "tool_calls": st.lists(CALL, min_size=1, max_size=2)},
    optional={"reasoning_content": TEXT},
)
FINAL = st.fixed_dictionaries({"content": TEXT}, optional={"reasoning_content": TEXT})


async def _rollout(
    replies: list[dict[str, Any]], *, template: str = "chatml", send_reasoning: bool = False
) -> tuple[Trajectory, list[dict[str, Any]]]:
    env = ToolEnv(record_tokens=True, send_reasoning=send_reasoning, max_turns=len(replies))
    server = MockModelServer(scripted(replies), tokens=True, chat_template=template)  # type: ignore[arg-type]
    async with server:
        group = await collect_group(env, [make_request(server)])
        bodies = [request.body for request in server.requests]
    await env.aclose()
    (trajectory,) = group.trajectories
    return trajectory, bodies


def _sampled(trajectory: Trajectory) -> list[int]:
    return [t for call in trajectory.model_calls for t in call.completion_token_ids or ()]


async def test_every_sampled_token_once_with_mask_one_and_tool_tokens_zero() -> None:
    replies = [tool_reply(("multiply", {"left": 6, "right": 7})), {"content": "42"}]
    trajectory, _ = await _rollout(replies)
    (sample,) = to_training_samples(trajectory)
    masked = [
        t for t, m in zip(sample["completion_ids"], sample["completion_mask"], strict=True) if m
    ]
    assert masked == _sampled(trajectory)
    toy = ToyChatTemplate()
    between = [
        t for t, m in zip(sample["completion_ids"], sample["completion_mask"], strict=True) if not m
    ]
    assert toy.decode(between) == (
        '\n<|im_start|>tool\n{"value":42}<|im_end|>\n<|im_start|>assistant\n'
    )
    logprobs = sample["completion_logprobs"]
    assert all(
        lp == 0.0 for lp, m in zip(logprobs, sample["completion_mask"], strict=True) if not m
    )


async def test_reasoning_the_server_no_longer_sees_starts_a_counted_sample() -> None:
    replies = [
        {**tool_reply(("multiply", {"left": 6, "right": 7})), "reasoning_content": "6*7"},
        {"content": "42"},
    ]
    kept, _ = await _rollout(replies, send_reasoning=True)
    dropped, _ = await _rollout(replies, send_reasoning=False)  # BaseEnv's default
    # BaseEnv settled, when it recorded each call, whether it continues the one before
    # (kept with the call, tied to that call's id tuples), so samples need no comparison.
    for record, continues in ((kept, True), (dropped, False)):
        first, second = record.model_calls
        settled = second._follows
        assert settled is not None and settled[2] is continues
        assert settled[0] is first.prompt_token_ids and settled[1] is first.completion_token_ids
    assert kept.token_prefix_breaks == 0 and len(to_training_samples(kept)) == 1
    assert dropped.token_prefix_breaks == 1
    samples = to_training_samples(dropped)
    assert len(samples) == 2
    masked = [
        t
        for s in samples
        for t, m in zip(s["completion_ids"], s["completion_mask"], strict=True)
        if m
    ]
    assert masked == _sampled(dropped)


async def _chat(server: MockModelServer, messages: list[dict[str, Any]]) -> CallTokens:
    body = {"model": "m", "messages": messages, "logprobs": True, "return_token_ids": True}
    async with httpx.AsyncClient() as client:
        reply = await client.post(f"{server.base_url}/chat/completions", json=body, timeout=60)
    tokens = read_call_tokens(reply.json())
    assert isinstance(tokens, CallTokens)
    return tokens


async def test_the_qwen3_template_drops_reasoning_after_a_new_user_turn() -> None:
    """A chat environment's second user turn: Qwen3's template renders the first answer
    without its reasoning, so the second call's prompt no longer continues the first."""
    answer = {"role": "assistant", "content": "4", "reasoning_content": "2+2"}
    conversation = [{"role": "user", "content": "2+2?"}]
    followed = [*conversation, answer, {"role": "user", "content": "and 3+3?"}]
    counted = {}
    for template in ("chatml", "qwen3"):
        policy = scripted([answer, {"content": "6"}])
        async with MockModelServer(policy, tokens=True, chat_template=template) as server:  # type: ignore[arg-type]
            first = await _chat(server, conversation)
            second = await _chat(server, followed)
        calls = [
            ModelCall(
                prompt_token_ids=t.prompt_token_ids,
                completion_token_ids=t.completion_token_ids,
                completion_logprobs=t.completion_logprobs,
            )
            for t in (first, second)
        ]
        record = Trajectory(
            rollout_id="r", example_id="e", termination_reason="finished", rewards={},
            model_calls=tuple(calls),
        )  # fmt: skip
        counted[template] = (record.token_prefix_breaks, len(to_training_samples(record)))
    assert counted == {"chatml": (0, 1), "qwen3": (1, 2)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(TURN, max_size=3),
    final=FINAL,
    template=st.sampled_from(["chatml", "qwen3"]),
    send_reasoning=st.booleans(),
)
def test_stitched_samples_are_the_servers_token_stream(
    turns: list[dict[str, Any]], final: dict[str, Any], template: str, send_reasoning: bool
) -> None:
    replies = [*turns, final]
    trajectory, bodies = asyncio.run(
        _rollout(replies, template=template, send_reasoning=send_reasoning)
    )
    assert trajectory.termination_reason == "finished"
    toy = ToyChatTemplate(template)  # type: ignore[arg-type]
    calls = trajectory.model_calls
    assert len(calls) == len(replies) == len(bodies)
    # Each call's ids are the server's: its template over what it was sent, what it wrote.
    streams = []
    for call, body in zip(calls, bodies, strict=True):
        prompt = toy.prompt_ids(body["messages"], body.get("tools"))
        assert list(call.prompt_token_ids or ()) == prompt
        streams.append(prompt + list(call.completion_token_ids or ()))
        positions = range(len(call.completion_token_ids or ()))
        expected = [
            toy_logprob(t, i)
            for t, i in zip(call.completion_token_ids or (), positions, strict=True)
        ]
        assert list(call.completion_logprobs or ()) == expected
    # A break exactly where reasoning the server saw is not sent back.
    breaks = sum("reasoning_content" in reply and not send_reasoning for reply in turns)
    assert trajectory.token_prefix_breaks == breaks
    samples = to_training_samples(trajectory)
    assert len(samples) == breaks + 1
    # Each sample is the server's stream up to the last call it stitched.
    ends = [
        i for i in range(len(calls)) if i == len(calls) - 1 or not calls[i + 1].continues(calls[i])
    ]
    for sample, end in zip(samples, ends, strict=True):
        assert sample["prompt_ids"] + sample["completion_ids"] == streams[end]
    masked = [
        t
        for s in samples
        for t, m in zip(s["completion_ids"], s["completion_mask"], strict=True)
        if m
    ]
    assert masked == _sampled(trajectory)
