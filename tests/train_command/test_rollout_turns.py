"""Token-in/token-out turns: the embedded sampler continues a rollout's exact ids.

A Qwen3-style chat template (written here) drops the ``<think>`` block of every assistant
turn but the last, so re-rendering the conversation for the next call changes ids the
model already sampled. Against ``PolicySampler.rollout_url`` each call of a rollout
extends the previous call's prompt + completion ids with the rendering of only the new
messages: a 3-turn calculator rollout (two tool calls, then the answer) has no token-prefix
break and every sampled token lands in its one training sequence. Against the plain
``base_url`` the same rollout breaks at each turn (the template really re-renders).
Run with ``uv run --group trl pytest -m train``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import httpx
from examples.calculator.env import CalculatorEnv
from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.integrations.trl import RolloutFunc, dataset_rows, load_examples
from benchmax.training import PolicySampler
from benchmax.training._rollout_sequence import rollout_sequence
from benchmax.trajectory import Trajectory

pytestmark = pytest.mark.train

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"

# ChatML like Qwen3: tools listed in the system turn, tool results as <tool_response> in a
# user turn, and the reasoning of every assistant turn but the last one dropped.
QWEN3_STYLE_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + m.role + '\\n' }}"
    "{% if m.role == 'system' and tools %}{{ 'Tools:' }}"
    "{% for t in tools %}{{ ' ' + t.function.name }}{% endfor %}{{ '\\n' }}{% endif %}"
    "{% set content = m.content if m.content is string else '' %}"
    "{% if m.role == 'assistant' and not loop.last and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}"
    "{{ content }}"
    "{% if m.tool_calls %}{% for tc in m.tool_calls %}"
    '{{ \'<tool_call>{"name": "\' + tc.function.name + \'", "arguments": \' }}'
    "{% if tc.function.arguments is string %}{{ tc.function.arguments }}"
    "{% else %}{{ tc.function.arguments | tojson }}{% endif %}"
    "{{ '}</tool_call>' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# (29 + 56) * 10 with the tools: the first eval example of the calculator.
TURNS = (
    '<think>add first</think><tool_call>{"name": "add", "arguments": {"a": 29, "b": 56}}'
    "</tool_call>",
    '<think>then multiply</think><tool_call>{"name": "multiply", "arguments": '
    '{"a": 85, "b": 10}}</tool_call>',
    "<think>done</think>The result is <answer>850</answer>",
)


def qwen3_style_tokenizer() -> Any:
    tokenizer = build_tokenizer()
    tokenizer.add_tokens(["<think>", "</think>"])
    tokenizer.chat_template = QWEN3_STYLE_TEMPLATE
    return tokenizer


def scripted(tokenizer: Any, turns: Sequence[str]) -> Any:
    """An ``allowed_tokens`` hook forcing each completion in turn to the next text of
    ``turns`` (then EOS): one rollout at a time, so completions start in order."""
    scripts: Iterator[list[int]] = iter(
        [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        for text in turns
    )
    current: list[int] = []

    def allowed(ids: Sequence[int]) -> Sequence[int] | None:
        nonlocal current
        if not ids:
            current = next(scripts)
        return [current[len(ids)]] if len(ids) < len(current) else None

    return allowed


def one_rollout(*, continued: bool) -> tuple[Trajectory, PolicySampler]:
    tokenizer = qwen3_style_tokenizer()
    model = build_model(tokenizer)
    env = CalculatorEnv()
    (example,) = load_examples(env, "eval", CALCULATOR, max_examples=1)
    prompt = dataset_rows([example])[0]["prompt"]
    found: list[Trajectory] = []
    with PolicySampler(model, tokenizer, allowed_tokens=scripted(tokenizer, TURNS)) as sampler:
        url = sampler.rollout_url if continued else sampler.base_url
        with RolloutFunc(
            env, [example], base_url=url, model=sampler.model_name, on_group=found.extend
        ) as rollout:
            rollout([prompt], None)
    (trajectory,) = found
    return trajectory, sampler


def test_a_re_rendering_template_causes_no_prefix_break_over_three_tool_turns() -> None:
    trajectory, sampler = one_rollout(continued=True)
    assert trajectory.termination_reason == "finished", trajectory.logs
    assert trajectory.rewards == {"correct": 1.0, "used_tools": 1.0}
    calls = trajectory.model_calls
    assert len(calls) == 3
    assert trajectory.token_prefix_breaks == 0
    assert sampler.turns.continued == 2 and sampler.turns.rendered == 0
    sequence = rollout_sequence(trajectory)
    assert sequence is not None and sequence.dropped_samples == 0
    # Full coverage: every sampled token is in the one sequence, trained (mask 1).
    sampled = sum(len(call.completion_token_ids or ()) for call in calls)
    tokenizer = qwen3_style_tokenizer()
    assert sum(sequence.completion_mask) == sampled
    assert list(sequence.prompt_ids) == list(calls[0].prompt_token_ids or ())
    # Each later prompt is the previous prompt + completion, then the new messages.
    for before, after in itertools.pairwise(calls):
        stream = [*(before.prompt_token_ids or ()), *(before.completion_token_ids or ())]
        assert list(after.prompt_token_ids or ())[: len(stream)] == stream
        added = str(tokenizer.decode(list(after.prompt_token_ids or ())[len(stream) :]))
        assert added.startswith("\n<|im_start|>user\n<tool_response>\n{")
        assert added.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")


def TOKENIZER_TEXT(ids: list[int]) -> str:
    return str(qwen3_style_tokenizer().decode(ids))


def test_the_same_rollout_re_rendered_whole_breaks_at_every_turn() -> None:
    trajectory, _ = one_rollout(continued=False)
    assert len(trajectory.model_calls) == 3
    assert trajectory.token_prefix_breaks == 2
    sequence = rollout_sequence(trajectory)
    assert sequence is not None and sequence.dropped_samples == 2


async def _chat(url: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "policy", "messages": messages, "max_tokens": 16, "return_token_ids": True}
    async with httpx.AsyncClient(timeout=120) as client:
        reply = await client.post(f"{url}/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def test_a_retry_an_edited_reply_and_another_history_are_rendered_as_sent() -> None:
    tokenizer = qwen3_style_tokenizer()
    model = build_model(tokenizer)
    question = [{"role": "user", "content": "Compute (12 + 7) * 3"}]
    turns = ("<think>a</think>19", "<think>b</think>57", "<think>c</think>57", "x", "y")
    with PolicySampler(model, tokenizer, allowed_tokens=scripted(tokenizer, turns)) as sampler:
        url = sampler.rollout_url.replace("{rollout_id}", "r1")
        first = asyncio.run(_chat(url, question))
        answer = first["choices"][0]["message"]
        assert answer["content"] == "<think>a</think>19"
        follow = [*question, answer, {"role": "user", "content": "times 3"}]
        second = asyncio.run(_chat(url, follow))
        stream = first["prompt_token_ids"] + first["choices"][0]["token_ids"]
        assert second["prompt_token_ids"][: len(stream)] == stream
        # The same request again (a client's retry): the same prompt ids.
        again = asyncio.run(_chat(url, follow))
        assert again["prompt_token_ids"] == second["prompt_token_ids"]
        # A reply the client edited: the conversation is rendered as sent.
        edited = [*follow, {"role": "assistant", "content": "57!"}, question[0]]
        rendered = asyncio.run(_chat(url, edited))
        whole = tokenizer.apply_chat_template(edited, add_generation_prompt=True, tokenize=False)
        assert rendered["prompt_token_ids"] == tokenizer.encode(whole, add_special_tokens=False)
        # Another rollout id has no history: rendered whole too.
        other = sampler.rollout_url.replace("{rollout_id}", "r2")
        fresh = asyncio.run(_chat(other, follow))
        whole = tokenizer.apply_chat_template(follow, add_generation_prompt=True, tokenize=False)
        assert fresh["prompt_token_ids"] == tokenizer.encode(whole, add_special_tokens=False)
    assert sampler.turns.continued == 2 and sampler.turns.rendered == 1
