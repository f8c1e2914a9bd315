"""BaseEnv's exact-token recording (issue 17 part 3) against the mock server's token mode."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest
from tests.envs.base.support import PROMPT, AnswerEnv, ToolEnv, make_request, tool_reply

from benchmax.envs._observer import RolloutReport, observe_rollouts
from benchmax.testing import MockModelServer, ToyChatTemplate, scripted


class Recorder:
    def __init__(self) -> None:
        self.reports: list[RolloutReport] = []

    def rollout_finished(self, report: RolloutReport) -> None:
        self.reports.append(report)


async def _run(env: Any, request: Any) -> tuple[Any, RolloutReport]:
    recorder = Recorder()
    with observe_rollouts(recorder):
        rollout = await env.run_rollout(request)
    (report,) = recorder.reports
    return rollout, report


async def test_tokens_off_sends_the_same_body_as_before() -> None:
    async with MockModelServer(scripted(["42"]), tokens=True) as server:
        rollout, report = await _run(
            AnswerEnv(sampling_args={"temperature": 0.5}), make_request(server)
        )
        (call,) = server.requests
    assert rollout.termination_reason == "finished"
    expected = {"model": "test-model", "messages": PROMPT, "temperature": 0.5}
    assert call.raw_body == json.dumps(expected, separators=(",", ":")).encode()
    assert [call.has_tokens for call in report.model_calls] == [False]


@pytest.mark.parametrize("how", ["attribute", "keyword", "request"])
async def test_each_switch_records_the_calls_tokens(how: str) -> None:
    class Recording(AnswerEnv):
        record_tokens = how == "attribute"

    env = Recording(record_tokens=True) if how == "keyword" else Recording()
    async with MockModelServer(scripted(["42"]), tokens=True) as server:
        request = make_request(server)
        if how == "request":
            request = dataclasses.replace(request, record_tokens=True)
        rollout, report = await _run(env, request)
        (call,) = server.requests
    assert rollout.termination_reason == "finished"
    assert call.body["logprobs"] is True and call.body["return_token_ids"] is True
    template = ToyChatTemplate()
    (tokens,) = report.model_calls
    assert tokens.prompt_token_ids == tuple(template.prompt_ids(PROMPT))
    assert tokens.completion_token_ids == tuple(template.completion_ids({"content": "42"}))
    assert len(tokens.completion_logprobs) == len(tokens.completion_token_ids)


async def test_sampling_args_come_after_the_token_fields() -> None:
    env = AnswerEnv(record_tokens=True, sampling_args={"return_tokens_as_token_ids": True})
    async with MockModelServer(scripted(["42"]), tokens=True) as server:
        rollout, report = await _run(env, make_request(server))
        (call,) = server.requests
    assert list(call.body)[2:] == ["logprobs", "return_token_ids", "return_tokens_as_token_ids"]
    assert rollout.termination_reason == "finished"
    assert [call.has_tokens for call in report.model_calls] == [True]


async def test_a_tool_turn_continues_the_token_stream() -> None:
    policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    async with MockModelServer(policy, tokens=True) as server:
        rollout, report = await _run(ToolEnv(record_tokens=True), make_request(server))
    assert rollout.termination_reason == "finished"
    first, second = report.model_calls
    stream = first.prompt_token_ids + first.completion_token_ids
    assert second.prompt_token_ids[: len(stream)] == stream
    tool_part = ToyChatTemplate().decode(second.prompt_token_ids[len(stream) :])
    assert tool_part.startswith("\n<|im_start|>tool\n{")


async def test_a_reply_without_tokens_ends_the_rollout(caplog: pytest.LogCaptureFixture) -> None:
    async with MockModelServer(scripted(["42"])) as server:  # not in token mode
        with caplog.at_level(logging.ERROR):
            rollout, report = await _run(AnswerEnv(record_tokens=True), make_request(server))
    assert rollout.termination_reason == "model_error"
    assert rollout.rewards == {"correct": 0.0}
    (call,) = report.model_calls
    assert call.prompt_token_ids is None and call.message_index is None
    assert "record_tokens is on but the reply lacked prompt token ids" in caplog.text


def test_record_tokens_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="record_tokens must be True or False"):
        AnswerEnv(record_tokens=1)  # type: ignore[arg-type]
