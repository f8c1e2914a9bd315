"""Property: over random multi-turn tool conversations through the real mock server, the
recorded tokens of each call reproduce the server's own token stream."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.envs.base.support import ToolEnv, make_request

from benchmax.envs._observer import RolloutReport, observe_rollouts
from benchmax.testing import MockModelServer, ToyChatTemplate, scripted

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
CALL = st.fixed_dictionaries({"left": st.integers(-99, 99), "right": st.integers(-99, 99)}).map(
    lambda arguments: {"name": "multiply", "arguments": arguments}
)
TURN = st.fixed_dictionaries(
    {"content": st.none() | TEXT, "tool_calls": st.lists(CALL, min_size=1, max_size=2)},
    optional={"reasoning_content": TEXT},
)
FINAL = st.fixed_dictionaries({"content": TEXT}, optional={"reasoning_content": TEXT})


class Recorder:
    def __init__(self) -> None:
        self.reports: list[RolloutReport] = []

    def rollout_finished(self, report: RolloutReport) -> None:
        self.reports.append(report)


async def _converse(
    replies: list[dict[str, Any]], template: str, send_reasoning: bool
) -> tuple[Any, RolloutReport, list[Any]]:
    env = ToolEnv(record_tokens=True, send_reasoning=send_reasoning, max_turns=len(replies))
    recorder = Recorder()
    async with MockModelServer(scripted(replies), tokens=True, chat_template=template) as server:  # type: ignore[arg-type]
        with observe_rollouts(recorder):
            rollout = await env.run_rollout(make_request(server))
        bodies = [request.body for request in server.requests]
    await env.aclose()
    return rollout, recorder.reports[0], bodies


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(TURN, max_size=3),
    final=FINAL,
    template=st.sampled_from(["chatml", "qwen3"]),
    send_reasoning=st.booleans(),
)
def test_recorded_tokens_are_the_servers_stream(
    turns: list[dict[str, Any]], final: dict[str, Any], template: str, send_reasoning: bool
) -> None:
    replies = [*turns, final]
    rollout, report, bodies = asyncio.run(_converse(replies, template, send_reasoning))
    assert rollout.termination_reason == "finished"
    toy = ToyChatTemplate(template)  # type: ignore[arg-type]
    calls = report.model_calls
    assert len(calls) == len(replies) == len(bodies)
    for tokens, body, reply in zip(calls, bodies, replies, strict=True):
        # Exactly the server's ids for what it was sent and what it answered.
        assert list(tokens.prompt_token_ids) == toy.prompt_ids(body["messages"], body.get("tools"))
        sent_reply = {**reply, "tool_calls": [
            {"function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply.get("tool_calls", [])
        ]}  # fmt: skip
        assert tokens.completion_token_ids is not None and tokens.completion_logprobs is not None
        assert list(tokens.completion_token_ids) == toy.completion_ids(sent_reply)
        assert len(tokens.completion_logprobs) == len(tokens.completion_token_ids)
    for earlier, later, reply in zip(calls, calls[1:], replies, strict=False):
        continues = later.continues(earlier)
        # The stream continues unless the template lost the reply's reasoning: not sent
        # back, or dropped by qwen3 (only before a later user turn: none here).
        assert continues == ("reasoning_content" not in reply or send_reasoning)
