"""BaseEnv against the replies real servers send, over real HTTP (beyond.md §7-8, issue 9)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tests.envs.base.support import (
    MULTIPLY_TOOL,
    PROMPT,
    AnswerEnv,
    ToolEnv,
    assert_env_record,
    make_request,
    tool_reply,
)

from benchmax._observer import RolloutReport, observe_rollouts
from benchmax.envs.base._sent_messages import messages_as_sent
from benchmax.envs.base.env import BaseRollout
from benchmax.envs.shared_types import Example, RewardMap, RolloutRequest
from benchmax.testing import Fault, MockModelServer, scripted

ENV_LOGGER = "benchmax.envs.base.env"
MODEL_FAILED = "base.rollout.model_failed rollout_id=rollout-0 termination_reason=model_error: "
MESSAGE = "choices[0].message"


def reply(message: Any, finish_reason: Any = "stop", **extra: Any) -> Fault:
    """Serve a chat.completion body whose first choice carries ``message``, as is."""
    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    return Fault.raw({"id": "c", "object": "chat.completion", "choices": [choice], **extra})


def calls(*entries: Any, content: Any = None, **fields: Any) -> Fault:
    message = {"role": "assistant", "content": content, "tool_calls": list(entries), **fields}
    return reply(message, "tool_calls")


def multiply(call_id: Any = None, arguments: Any = '{"left":6,"right":7}', **fields: Any) -> Any:
    entry = {"type": "function", "function": {"name": "multiply", "arguments": arguments}}
    if call_id is not None:
        entry["id"] = call_id
    return {**entry, **fields}


def answer(text: Any = "It is 42.", finish_reason: Any = "stop", **fields: Any) -> Fault:
    return reply({"role": "assistant", "content": text, **fields}, finish_reason)


def env_messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == ENV_LOGGER]


class Recorder:
    def __init__(self) -> None:
        self.reports: list[RolloutReport] = []

    def rollout_finished(self, report: RolloutReport) -> None:
        self.reports.append(report)


# -- §1: no server reply raises out of run_group ---------------------------------------------------

UNUSABLE = {
    "tool_calls-object": (
        reply(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": {"id": "c1", "function": {"name": "multiply", "arguments": "{}"}},
            },
            "tool_calls",
        ),
        f"{MESSAGE}.tool_calls must be a list, got "
        "{'id': 'c1', 'function': {'name': 'multiply', 'arguments': '{}'}}",
    ),
    "function-null": (
        calls({"id": "c1", "type": "function", "function": None}),
        f"{MESSAGE}.tool_calls[0].function must be an object, got None",
    ),
    "custom-call": (
        calls({"id": "c1", "type": "custom", "custom": {"name": "multiply", "input": "6*7"}}),
        f"{MESSAGE}.tool_calls[0].type must be 'function' (a function tool call), got 'custom'",
    ),
    "name-number": (
        calls({"id": "c1", "function": {"name": 7, "arguments": "{}"}}),
        f"{MESSAGE}.tool_calls[0].function.name must be a string, got 7",
    ),
    "message-null": (reply(None), f"{MESSAGE} must be an object, got None"),
    "message-text": (reply("42"), f"{MESSAGE} must be an object, got '42'"),
    "choice-null": (Fault.raw({"choices": [None]}), "choices[0] must be an object, got None"),
    "choices-object": (Fault.raw({"choices": {}}), "choices must be a list, got {}"),
    "body-list": (Fault.raw([1, 2]), "the response must be a JSON object, got [1, 2]"),
    "body-null": (Fault.raw(None), "the response must be a JSON object, got None"),
    "content-number": (
        reply({"role": "assistant", "content": 42}),
        f"{MESSAGE}.content must be a string, null or a list of parts, got 42",
    ),
    # 200 replies carrying an error object are classified by the chat call
    # (tests/envs/base/test_model_replies_wire.py), before any reply is read.
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
async def test_unusable_replies_settle_as_model_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    fault, message = UNUSABLE[case]
    mock_server.policy = scripted([fault])
    env = ToolEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert env.tool_calls == [] and env.reward_calls == []
    assert_env_record(caplog, MODEL_FAILED + message)
    rollout = await env.run_rollout(make_request(mock_server, "rollout-1"))
    assert rollout.messages == PROMPT  # nothing appended for an unusable reply
    await env.aclose()


async def test_a_call_without_type_runs_the_tool(mock_server: MockModelServer) -> None:
    entry = {"id": "c1", "function": {"name": "multiply", "arguments": '{"left":6,"right":7}'}}
    mock_server.policy = scripted([calls(entry), answer()])
    env = ToolEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "finished"
    assert outcomes["rollout-0"].rewards == {"correct": 1.0}
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    second = mock_server.requests[1].body["messages"]
    assert second[1]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "multiply", "arguments": '{"left":6,"right":7}'},
        }
    ]
    assert second[2] == {"role": "tool", "tool_call_id": "c1", "content": '{"value":42}'}
    await env.aclose()


async def test_object_arguments_are_used_and_sent_back_as_json_text(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted([calls(multiply("c1", {"left": 6, "right": 7})), answer()])
    env = ToolEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    sent = mock_server.requests[1].body["messages"][1]
    assert sent["tool_calls"][0]["function"]["arguments"] == '{"left":6,"right":7}'
    assert rollout.messages[1] == {**sent, "content": None}  # null is sent as ""
    await env.aclose()


@pytest.mark.parametrize(
    ("arguments", "content"),
    [
        ([6, 7], "Tool arguments must be a JSON object."),
        ("{oops", "Invalid JSON tool arguments: Expecting property name enclosed in double quotes"),
        (12, "Tool arguments must be a JSON object."),
    ],
)
async def test_unusable_arguments_are_answered_not_run(
    mock_server: MockModelServer, arguments: Any, content: str
) -> None:
    mock_server.policy = scripted([calls(multiply("c1", arguments)), answer()])
    env = ToolEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert env.tool_calls == []
    assert rollout.messages[2] == {"role": "tool", "tool_call_id": "c1", "content": content}
    await env.aclose()


async def test_missing_empty_and_duplicate_ids_are_unique_and_consistent(
    mock_server: MockModelServer,
) -> None:
    first = calls(multiply(), multiply(""), multiply("dup"), multiply("dup"), multiply(5))
    second = calls(multiply("dup"), multiply("call_1"), multiply())
    mock_server.policy = scripted([first, second, answer()])
    env = ToolEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert len(env.tool_calls) == 8

    assistant_ids: list[str] = []
    tool_ids: list[str] = []
    for message in rollout.messages:
        if message["role"] == "assistant" and "tool_calls" in message:
            assistant_ids.extend(call["id"] for call in message["tool_calls"])
        if message["role"] == "tool":
            tool_ids.append(message["tool_call_id"])
    assert assistant_ids == tool_ids
    assert len(set(assistant_ids)) == 8  # unique within the rollout, across turns too
    assert assistant_ids[2] == "dup"  # a usable id is kept
    assert assistant_ids[:2] == ["call_1", "call_2"]
    assert all(i.startswith("call_") for k, i in enumerate(assistant_ids) if k != 2)
    # What the model was sent is the same transcript (null content beside calls as "").
    assert mock_server.requests[2].body["messages"] == messages_as_sent(rollout.messages[:-1])
    await env.aclose()


# -- §2: finish_reason comes from one table --------------------------------------------------------


@pytest.mark.parametrize(
    ("finish_reason", "text", "expected"),
    [
        ("eos", "It is 42.", "finished"),
        ("End_Turn", "It is 42.", "finished"),
        ("tool_calls", "It is 42.", "finished"),
        ("function_call", "It is 42.", "finished"),
        ("", "It is 42.", "finished"),
        (None, "It is 42.", "finished"),
        ("", None, "model_error"),
        (None, "", "model_error"),
        ("error", "It is 42.", "model_error"),
        ("max_tokens", "It is 4", "output_exceeded"),
        ("model_length", "It is 4", "output_exceeded"),
        ("safety", "", "content_filter"),
        ("PROHIBITED_CONTENT", "", "content_filter"),
        ("banana", "It is 42.", "model_error"),
        (3, "It is 42.", "model_error"),
    ],
)
async def test_finish_reasons_map_through_the_table_and_are_logged(
    mock_server: MockModelServer,
    caplog: pytest.LogCaptureFixture,
    finish_reason: Any,
    text: Any,
    expected: str,
) -> None:
    mock_server.policy = scripted([answer(text, finish_reason)])
    env = AnswerEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    outcome = outcomes["rollout-0"]
    assert outcome.termination_reason == expected
    assert outcome.rewards == {"correct": 1.0 if expected == "finished" else 0.0}
    ((level, message),) = env_messages(caplog)
    assert level == logging.WARNING
    prefix = f"base.rollout.finish_reason rollout_id=rollout-0 termination_reason={expected}: "
    assert message.startswith(prefix + f"finish_reason {finish_reason!r} ")


async def test_stop_is_not_logged(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = scripted([answer("It is 42.", "stop"), answer("It is 42.", "STOP")])
    env = AnswerEnv()
    for rollout_id in ("rollout-0", "rollout-0"):
        rollout = await env.run_rollout(make_request(mock_server, rollout_id))
        assert rollout.termination_reason == "finished"
    assert env_messages(caplog) == []
    await env.aclose()


async def test_text_in_parts_with_null_finish_reason_finishes(mock_server: MockModelServer) -> None:
    parts = [{"type": "text", "text": "It is "}, {"type": "text", "text": "42."}]
    mock_server.policy = scripted([answer(parts, None)])
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert rollout.messages[-1] == {"role": "assistant", "content": parts}
    await env.aclose()


class MappedEnv(AnswerEnv):
    finish_reasons = {"EOS": "output_exceeded", "done": "finished", "stop": "finished"}


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [("eos", "output_exceeded"), ("DONE", "finished"), ("length", "output_exceeded")],
)
async def test_finish_reasons_attribute_extends_and_overrides(
    mock_server: MockModelServer, finish_reason: str, expected: str
) -> None:
    mock_server.policy = scripted([answer("It is 42.", finish_reason)])
    env = MappedEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == expected
    await env.aclose()


@pytest.mark.parametrize(
    ("finish_reasons", "error", "message"),
    [
        ({"eos": ""}, ValueError, r"finish_reasons\['eos'\] must be a termination reason"),
        ({"eos": None}, ValueError, r"finish_reasons\['eos'\] must be a termination reason"),
        ({None: "finished"}, TypeError, "finish_reasons keys must be strings"),
        (["eos"], TypeError, "finish_reasons must be a mapping"),
    ],
)
def test_finish_reasons_attribute_is_validated(
    finish_reasons: Any, error: type[Exception], message: str
) -> None:
    class BadMapping(AnswerEnv):
        pass

    BadMapping.finish_reasons = finish_reasons
    with pytest.raises(error, match=message):
        BadMapping()


async def test_finish_reasons_are_validated_again_before_a_rollout(
    mock_server: MockModelServer,
) -> None:
    env = AnswerEnv()
    env.finish_reasons = {"eos": 5}  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="must be a termination reason"):
        await env.run_rollout(make_request(mock_server))
    assert mock_server.requests == []


# -- §3: reasoning fields --------------------------------------------------------------------------


def reasoning_script() -> list[Fault]:
    return [
        calls(multiply("c1"), reasoning_content="I need to multiply.", reasoning=None),
        answer("It is 42.", reasoning_content="6*7=42", reasoning={"summary": "done"}),
    ]


async def test_reasoning_is_kept_in_the_transcript_but_not_sent_back(
    mock_server: MockModelServer,
) -> None:
    prompt = [{"role": "user", "content": "6*7?", "reasoning_content": "prompt's own field"}]
    mock_server.policy = scripted(reasoning_script())
    recorder = Recorder()
    env = ToolEnv()
    with observe_rollouts(recorder):
        rollout = await env.run_rollout(
            make_request(mock_server, payload={"prompt_messages": prompt, "answer": "42"})
        )
    assert rollout.termination_reason == "finished"
    assistant_1, tool, assistant_2 = rollout.messages[1:]
    assert assistant_1 == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "I need to multiply.",
        "tool_calls": [multiply("c1")],
    }
    assert assistant_2 == {
        "role": "assistant",
        "content": "It is 42.",
        "reasoning_content": "6*7=42",
        "reasoning": {"summary": "done"},
    }
    (report,) = recorder.reports
    assert list(report.messages or ()) == rollout.messages
    assert env.reward_calls[0].messages == rollout.messages  # compute_reward sees it all

    sent = mock_server.requests[1].body["messages"]
    assert sent == [
        prompt[0],  # a prompt's extra keys are passed through untouched
        {"role": "assistant", "content": "", "tool_calls": [multiply("c1")]},
        tool,
    ]
    await env.aclose()


@pytest.mark.parametrize("how", ["keyword", "class"])
async def test_send_reasoning_sends_it_as_received(mock_server: MockModelServer, how: str) -> None:
    class Reasoning(ToolEnv):
        send_reasoning = how == "class"

    mock_server.policy = scripted(reasoning_script())
    env = Reasoning(send_reasoning=True) if how == "keyword" else Reasoning()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    sent = mock_server.requests[1].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "I need to multiply.",
        "tool_calls": [multiply("c1")],
    }
    assert sent == messages_as_sent(rollout.messages[:3])
    assert rollout.messages[1]["content"] is None  # the transcript keeps what was sent
    await env.aclose()


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_send_reasoning_must_be_a_bool(value: Any) -> None:
    class Odd(AnswerEnv):
        send_reasoning = value  # type: ignore[assignment]

    with pytest.raises(TypeError, match="send_reasoning must be True or False"):
        Odd()


# -- §8: sampling args ----------------------------------------------------------------------------


async def test_no_sampling_args_send_exactly_the_0_2_body(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    env = ToolEnv()
    await env.run_rollout(make_request(mock_server))
    for recorded in mock_server.requests:
        assert list(recorded.body) == ["model", "messages", "tools"]
    await env.aclose()


class SampledEnv(ToolEnv):
    sampling_args = {"temperature": 0.2, "max_tokens": 64, "top_p": 0.9}


async def test_sampling_args_request_wins_over_env(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    env = SampledEnv(sampling_args={"temperature": 0.5, "max_tokens": 64, "stop": ["</a>"]})
    request = make_request(mock_server)
    request = RolloutRequest(
        rollout_id=request.rollout_id,
        example=request.example,
        model=request.model,
        base_url=request.base_url,
        model_auth=request.model_auth,
        sampling_args={"temperature": 1.0, "seed": 7},
    )
    rollout = await env.run_rollout(request)
    assert rollout.termination_reason == "finished"
    assert len(mock_server.requests) == 2
    for recorded in mock_server.requests:  # every turn carries them
        body = recorded.body
        assert list(body) == [
            "model",
            "messages",
            "tools",
            "temperature",
            "max_tokens",
            "stop",
            "seed",
        ]
        assert body["model"] == "test-model"
        assert body["temperature"] == 1.0
        assert body["max_tokens"] == 64
        assert body["stop"] == ["</a>"]
        assert body["seed"] == 7
        assert "top_p" not in body  # the keyword replaced the class attribute
    await env.aclose()


async def test_class_sampling_args_apply_without_tools(mock_server: MockModelServer) -> None:
    class Sampled(AnswerEnv):
        sampling_args = {"temperature": 0}

    env = Sampled()
    await env.run_rollout(make_request(mock_server))
    (recorded,) = mock_server.requests
    assert recorded.body == {"model": "test-model", "messages": PROMPT, "temperature": 0}
    await env.aclose()


@pytest.mark.parametrize(
    ("sampling_args", "error", "message"),
    [
        ({"model": "other"}, ValueError, "sampling_args must not set 'model'"),
        ({"messages": []}, ValueError, "sampling_args must not set 'messages'"),
        ({"tools": []}, ValueError, "sampling_args must not set 'tools'"),
        ({"stream": True}, ValueError, "sampling_args must not set 'stream' to true"),
        ({"stream": 1}, ValueError, "sampling_args must not set 'stream' to true"),
        ({"n": 2}, ValueError, r"sampling_args\['n'\] must be 1, got 2"),
        ({"n": 1.0}, ValueError, r"sampling_args\['n'\] must be 1, got 1.0"),
        ({"temperature": math.nan}, ValueError, r"sampling_args\['temperature'\] must be JSON"),
        ({"seed": object()}, ValueError, r"sampling_args\['seed'\] must be JSON"),
        ("temperature=0", TypeError, "sampling_args must be a mapping"),
        ({1: 2}, TypeError, "sampling_args keys must be non-empty strings"),
    ],
)
def test_sampling_args_are_validated(
    sampling_args: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        AnswerEnv(sampling_args=sampling_args)

    class Bad(AnswerEnv):
        pass

    Bad.sampling_args = sampling_args
    with pytest.raises(error, match=message):
        Bad()


def test_sampling_args_keyword_is_copied() -> None:
    given = {"temperature": 0.1}
    env = AnswerEnv(sampling_args=given)
    given["temperature"] = 9
    assert env.sampling_args == {"temperature": 0.1}


# -- §4: reward values and reward_timeout ----------------------------------------------------------


class RewardEnv(AnswerEnv):
    reward_keys = ("correct", "style")

    def __init__(self, rewards: Any = None, delay: float = 0.0, **settings: Any) -> None:
        super().__init__(**settings)
        self.rewards = rewards
        self.delay = delay

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        await asyncio.sleep(self.delay)
        if isinstance(self.rewards, BaseException):
            raise self.rewards
        return self.rewards


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
async def test_non_finite_reward_is_reward_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, value: float
) -> None:
    env = RewardEnv({"correct": 1.0, "style": value})
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "reward_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0, "style": 0.0}
    assert_env_record(
        caplog,
        "base.rollout.reward_failed rollout_id=rollout-0 termination_reason=reward_error: "
        f"compute_reward returned a non-finite value for reward 'style': {value!r}",
    )
    await env.aclose()


async def test_non_finite_partial_reward_left_to_the_group_hook_is_reward_error(
    mock_server: MockModelServer,
) -> None:
    env = RewardEnv({"correct": math.nan})
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "reward_error"
    await env.aclose()


@pytest.mark.parametrize(
    ("rewards", "error", "message"),
    [
        ({"correct": "1", "style": math.nan}, ValueError, "reward 'correct' must be numeric"),
        ({"correct": True, "style": 1.0}, ValueError, "reward 'correct' must be numeric"),
        ({"correct": 1.0, "other": math.nan}, ValueError, "reward 'other' must be finite"),
        ([("correct", 1.0)], TypeError, "rewards must be a mapping"),
        ({}, ValueError, "rewards must contain the env's reward keys"),
    ],
)
async def test_other_invalid_rewards_stay_contract_errors_naming_the_hook(
    mock_server: MockModelServer, rewards: Any, error: type[Exception], message: str
) -> None:
    env = RewardEnv(rewards)
    with pytest.raises(error, match=message) as raised:
        await env.run_group([make_request(mock_server)])
    assert raised.value.__notes__ == ["benchmax: raised by RewardEnv.compute_reward"]
    await env.aclose()


async def test_reward_timeout_bounds_compute_reward(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    env = RewardEnv({"correct": 1.0, "style": 1.0}, delay=30, reward_timeout=0.05)
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "reward_timeout"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0, "style": 0.0}
    assert_env_record(
        caplog,
        "base.rollout.reward_failed rollout_id=rollout-0 termination_reason=reward_timeout: "
        "compute_reward exceeded reward_timeout of 0.05s",
        exc_type=TimeoutError,
    )
    await env.aclose()


async def test_reward_timeout_as_class_attribute(mock_server: MockModelServer) -> None:
    class Slow(RewardEnv):
        reward_timeout = 0.05

    env = Slow({"correct": 1.0, "style": 1.0}, delay=30)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "reward_timeout"
    await env.aclose()


async def test_a_hook_raising_timeout_error_itself_is_reward_error(
    mock_server: MockModelServer,
) -> None:
    env = RewardEnv(TimeoutError("judge too slow"), reward_timeout=30)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "reward_error"
    await env.aclose()


async def test_a_fast_hook_is_unaffected_by_reward_timeout(mock_server: MockModelServer) -> None:
    env = RewardEnv({"correct": 1.0, "style": 0.5}, reward_timeout=30)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert rollout.rewards == {"correct": 1.0, "style": 0.5}
    await env.aclose()


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, True, "5", 10**400])
def test_reward_timeout_is_validated_like_the_other_timeouts(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^reward_timeout must be a positive number or None$"):
        AnswerEnv(reward_timeout=value)


# -- §6: reserved tool argument names -------------------------------------------------------------


@pytest.mark.parametrize("name", ["rollout_id", "tool_name"])
async def test_reserved_argument_names_are_answered_not_run(
    mock_server: MockModelServer, name: str
) -> None:
    arguments = {"left": 6, "right": 7, name: "x"}
    mock_server.policy = scripted(
        [tool_reply(("multiply", arguments), ("multiply", {"left": 6, "right": 7})), "42"]
    )
    env = ToolEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "finished"
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    tool_messages = [m for m in env.reward_calls[0].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        f"Tool argument name {name!r} is reserved.",
        '{"value":42}',
    ]
    await env.aclose()


# -- usage -----------------------------------------------------------------------------------------


async def test_usage_is_summed_over_the_rollout(mock_server: MockModelServer) -> None:
    usage_1 = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    usage_2 = {
        "prompt_tokens": 20,
        "completion_tokens": 3,
        "total_tokens": 23,
        "prompt_tokens_details": {"cached_tokens": 10},
    }
    first = Fault.raw(
        {
            "choices": [
                {
                    "message": {"content": None, "tool_calls": [multiply("c1")]},
                    "finish_reason": None,
                }
            ],
            "usage": usage_1,
        }
    )
    second = Fault.raw(
        {"choices": [{"message": {"content": "42"}, "finish_reason": "stop"}], "usage": usage_2}
    )
    mock_server.policy = scripted([first, second])
    recorder = Recorder()
    env = ToolEnv()
    with observe_rollouts(recorder):
        await env.run_rollout(make_request(mock_server))
    (report,) = recorder.reports
    assert report.usage == {
        "prompt_tokens": 30,
        "completion_tokens": 8,
        "total_tokens": 38,
        "reasoning_tokens": 2,
        "cached_tokens": 10,
    }
    await env.aclose()


@pytest.mark.parametrize(
    ("script", "usage"),
    [
        ([answer()], None),
        (
            [calls(multiply("c1")), Fault.raw({"choices": [], "usage": {"prompt_tokens": 4}})],
            {"prompt_tokens": 4},
        ),
        (
            [
                Fault.raw(
                    {
                        "choices": [{"message": {"tool_calls": [multiply("c1")]}}],
                        "usage": {"completion_tokens": 2, "total_tokens": None},
                    }
                ),
                answer(),
            ],
            {"completion_tokens": 2},
        ),
    ],
    ids=["none", "failed-reply", "partial"],
)
async def test_usage_not_reported_stays_absent(
    mock_server: MockModelServer, script: list[Fault], usage: Any
) -> None:
    mock_server.policy = scripted(script)
    recorder = Recorder()
    env = ToolEnv()
    with observe_rollouts(recorder):
        await env.run_rollout(make_request(mock_server))
    (report,) = recorder.reports
    assert report.usage == usage
    await env.aclose()


async def test_mock_server_usage_reaches_the_report(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["It is 42."])
    recorder = Recorder()
    env = AnswerEnv()
    with observe_rollouts(recorder):
        await env.run_rollout(make_request(mock_server))
    (report,) = recorder.reports
    assert report.usage is not None
    assert set(report.usage) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert report.usage["total_tokens"] == (
        report.usage["prompt_tokens"] + report.usage["completion_tokens"]
    )
    await env.aclose()


# -- contract errors name the hook that broke the contract -----------------------------------------


class HookEnv(ToolEnv):
    broken: str = ""

    async def list_tools(self) -> list[Any]:
        if self.broken == "list_tools":
            raise RuntimeError("tool registry unavailable")
        return [MULTIPLY_TOOL]

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example[Any]) -> AsyncIterator[None]:
        if self.broken == "enter":
            raise OSError("sandbox did not start")
        yield
        if self.broken == "exit":
            raise OSError("sandbox did not stop")


@pytest.mark.parametrize(
    ("broken", "error", "hook"),
    [
        ("list_tools", RuntimeError, "list_tools"),
        # beyond.md §9: rollout_context failing on enter is setup_error and an exception on
        # exit is logged (tests/envs/base/test_stray_cancellation.py).
    ],
)
async def test_contract_errors_name_the_hook(
    mock_server: MockModelServer, broken: str, error: type[Exception], hook: str
) -> None:
    env = HookEnv()
    env.broken = broken
    with pytest.raises(error) as raised:
        await env.run_group([make_request(mock_server)])
    assert raised.value.__notes__ == [f"benchmax: raised by HookEnv.{hook}"]
    await env.aclose()


async def test_a_rollout_context_that_is_not_a_context_manager_is_named(
    mock_server: MockModelServer,
) -> None:
    class NotAContext(AnswerEnv):
        def rollout_context(self, rollout_id: str, example: Example[Any]) -> Any:  # type: ignore[override]
            return None

    env = NotAContext()
    with pytest.raises((AttributeError, TypeError)) as raised:
        await env.run_rollout(make_request(mock_server))
    assert raised.value.__notes__ == ["benchmax: raised by NotAContext.rollout_context"]


async def test_bad_payload_names_run_rollout(mock_server: MockModelServer) -> None:
    env = AnswerEnv()
    with pytest.raises(ValueError, match="prompt_messages") as raised:
        await env.run_group([make_request(mock_server, payload={"question": "6*7?"})])
    assert raised.value.__notes__ == ["benchmax: raised by AnswerEnv.run_rollout"]


async def test_rollout_context_still_sees_the_body_error_and_may_suppress_nothing(
    mock_server: MockModelServer,
) -> None:
    seen: list[BaseException | None] = []

    class Watching(HookEnv):
        @asynccontextmanager
        async def rollout_context(
            self, rollout_id: str, example: Example[Any]
        ) -> AsyncIterator[None]:
            try:
                yield
            except Exception as error:
                seen.append(error)
                raise

    env = Watching()
    env.broken = "list_tools"
    with pytest.raises(RuntimeError) as raised:
        await env.run_rollout(make_request(mock_server))
    assert seen == [raised.value]
    assert raised.value.__notes__ == ["benchmax: raised by Watching.list_tools"]


async def test_sampling_args_may_set_stream_false(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["42"])
    env = AnswerEnv(sampling_args={"stream": False})
    request = make_request(mock_server)
    request = dataclasses.replace(request, sampling_args={"stream": False})
    try:
        rollout = await env.run_rollout(request)
    finally:
        await env.aclose()
    assert rollout.termination_reason == "finished"
    assert mock_server.requests[0].body["stream"] is False
