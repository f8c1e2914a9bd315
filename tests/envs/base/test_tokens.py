"""BaseEnv's exact-token recording (issue 17 part 3) against the mock server's token mode."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest
from tests.envs.base.support import PAYLOAD as PAYLOAD_42
from tests.envs.base.support import PROMPT, AnswerEnv, ToolEnv, make_request, tool_reply

from benchmax._observer import RolloutReport, observe_rollouts
from benchmax.testing import Fault, MockModelServer, ToyChatTemplate, scripted


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


def _token_reply(**changes: Any) -> dict[str, Any]:
    """A vLLM-shaped reply with exact tokens, ``changes`` applied to its first choice."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": "42"},
        "finish_reason": "stop",
        "token_ids": [7, 8],
        "logprobs": {"content": [{"token": "4", "logprob": -0.1}, {"token": "2", "logprob": -0.2}]},
    }
    choice.update(changes)
    return {"choices": [choice], "prompt_token_ids": [1, 2, 3]}


def _entries(*pairs: tuple[Any, Any]) -> dict[str, Any]:
    return {"content": [{"token": token, "logprob": logprob} for token, logprob in pairs]}


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (  # str.isdigit() accepts '²', int() does not: once an uncaught ValueError
            {"token_ids": None, "logprobs": _entries(("token_id:4", -0.1), ("token_id:²", -0.2))},
            "the reply lacked completion token ids",
        ),
        ({"token_ids": [7, 2**63]}, "item 1 is 9223372036854775808, outside [0, 2**63)"),
        ({"logprobs": _entries(("4", -0.1), ("2", 0.25))}, "a logprob <= 0"),
        ({"logprobs": _entries(("4", float("nan")), ("2", -0.2))}, "a finite logprob"),
        ({"logprobs": _entries(("4", -0.1), ("2", 10**400))}, "a finite logprob"),
    ],
    ids=["superscript-digit", "id-2^63", "positive-logprob", "nan-logprob", "huge-int-logprob"],
)
async def test_bad_token_data_is_that_rollouts_model_error(
    changes: dict[str, Any], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with MockModelServer(scripted(["42"])) as server:
        server.inject(Fault.raw(_token_reply(**changes)), times=None)
        with caplog.at_level(logging.ERROR):
            rollout, report = await _run(AnswerEnv(record_tokens=True), make_request(server))
    assert rollout.termination_reason == "model_error"
    assert rollout.rewards == {"correct": 0.0}
    (call,) = report.model_calls
    assert call.prompt_token_ids is None and call.completion_token_ids is None
    assert "record_tokens is on but the reply lacked" in caplog.text
    assert said in caplog.text


async def test_integer_token_ids_on_each_entry_are_recorded() -> None:
    logprobs = {
        "content": [
            {"token": "4", "logprob": -0.1, "token_id": 19},
            {"token": "2", "logprob": 0.0, "token_id": 17},
        ]
    }
    async with MockModelServer(scripted(["42"])) as server:
        server.inject(Fault.raw(_token_reply(token_ids=None, logprobs=logprobs)))
        rollout, report = await _run(AnswerEnv(record_tokens=True), make_request(server))
    assert rollout.termination_reason == "finished"
    (call,) = report.model_calls
    assert call.prompt_token_ids == (1, 2, 3)
    assert call.completion_token_ids == (19, 17)
    assert call.completion_logprobs == (-0.1, 0.0)


async def test_a_run_goes_on_past_bad_token_data(tmp_path: Any) -> None:
    """Every group is run and saved: bad token data is each rollout's own outcome."""
    from benchmax.envs import Dataset, Example
    from benchmax.runner import RunConfig, run_environment

    class TwoExamples(AnswerEnv):
        async def create_dataset(
            self, split: Any, base_dir: Any, *, max_examples: Any = None
        ) -> Any:
            return Dataset([Example(id=f"e{i}", payload=PAYLOAD_42) for i in range(2)])

    bad = _token_reply(
        token_ids=None, logprobs=_entries(("token_id:²", -0.1), ("token_id:3", -0.2))
    )
    output = tmp_path / "run.jsonl"
    async with MockModelServer(scripted(["42"])) as server:
        server.inject(Fault.raw(bad), times=None)
        config = RunConfig(model="m", base_url=server.base_url, group_size=2, output=output)
        report = await run_environment(TwoExamples(record_tokens=True), config)
    assert report.rollouts_by_reason == {"model_error": 4}
    lines = [json.loads(line) for line in output.read_text().splitlines()[1:]]
    assert sorted(line["termination_reason"] for line in lines) == ["model_error"] * 4
