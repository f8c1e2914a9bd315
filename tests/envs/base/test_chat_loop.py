"""BaseEnv end to end over real HTTP: requests, transcripts, scoring and group merges."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from tests.envs.base.support import (
    PROMPT,
    AnswerEnv,
    CountingAuth,
    ToolEnv,
    assert_env_record,
    make_request,
    tool_reply,
)

from benchmax.auth import InjectedAuth
from benchmax.envs.base.env import BaseRollout
from benchmax.envs.shared_types import RewardMap
from benchmax.rewards import JudgeError
from benchmax.testing import Fault, MockModelServer, scripted

MODEL_FAILED = "base.rollout.model_failed rollout_id=rollout-0 termination_reason="


async def test_siblings_post_to_their_own_urls_concurrently(mock_server: MockModelServer) -> None:
    in_flight = 0
    peak = 0
    all_in = asyncio.Event()

    async def slow_answer(body: dict[str, Any]) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 4:
            all_in.set()
        # Held until all four are in flight: only concurrent requests get past this.
        await asyncio.wait_for(all_in.wait(), 60)
        in_flight -= 1
        return "It is 42."

    mock_server.policy = slow_answer
    env = AnswerEnv()
    requests = [make_request(mock_server, f"rollout-{i}") for i in range(4)]
    outcomes = await env.run_group(requests)

    assert list(outcomes) == [r.rollout_id for r in requests]
    assert all(o.termination_reason == "finished" for o in outcomes.values())
    assert all(o.rewards == {"correct": 1.0} for o in outcomes.values())
    assert peak == 4
    for request in requests:
        (recorded,) = mock_server.requests_for(request.rollout_id)
        assert recorded.path == f"/sessions/{request.rollout_id}/v1/chat/completions"
        assert recorded.headers["authorization"] == f"Bearer key-{request.rollout_id}"
        assert recorded.body == {"model": "test-model", "messages": PROMPT}
    assert sorted(r.rollout_id for r in env.reward_calls) == sorted(outcomes)
    for rollout in env.reward_calls:
        assert rollout.example_args == {"answer": "42"}
        assert rollout.termination_reason == "finished" and rollout.rewards is None
    await env.aclose()


async def test_transcript_copies_prompt_and_keeps_extra_keys(mock_server: MockModelServer) -> None:
    prompt = [
        {"role": "system", "content": "be brief", "name": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "6*7?"}], "x-extra": {"a": 1}},
    ]
    payload = {"prompt_messages": prompt, "answer": "42", "level": 3}
    mock_server.policy = scripted(["42"])
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server, payload=payload))

    (recorded,) = mock_server.requests
    assert recorded.body["messages"] == prompt
    assert rollout.messages[:2] == prompt
    assert rollout.messages[0] is not prompt[0]
    assert rollout.messages[2] == {"role": "assistant", "content": "42"}
    assert list(rollout.messages[2]) == ["role", "content"]
    assert payload["prompt_messages"] is prompt and len(prompt) == 2
    assert rollout.example_args == {"answer": "42", "level": 3}
    assert rollout.split == "train"
    await env.aclose()


async def test_tool_turn_sends_exact_transcript_and_finishes(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(
        [
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "multiply", "arguments": '{"left":6,"right":7}'},
                    }
                ],
            },
            "The answer is 42.",
        ]
    )
    env = ToolEnv()
    outcomes = await env.run_group([make_request(mock_server)])

    assert outcomes["rollout-0"].termination_reason == "finished"
    assert outcomes["rollout-0"].rewards == {"correct": 1.0}
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    first, second = mock_server.requests
    assert first.body["tools"] == [dict(t) for t in ToolEnv.tools]
    # Sent with content "" where the model sent null beside tool calls (llama-cpp-python's
    # server refuses null there); the recorded transcript keeps null (test_sent_messages.py).
    assert second.body["messages"] == [
        PROMPT[0],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"left":6,"right":7}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call-1", "content": '{"value":42}'},
    ]
    assert set(second.body) == {"model", "messages", "tools"}
    await env.aclose()


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [
        ("length", "output_exceeded"),
        ("content_filter", "content_filter"),
        # beyond.md §7 changed the 0.2 rows None -> model_error and "tool_calls" ->
        # "tool_calls" (a text reply now finishes): see tests/envs/base/test_replies.py.
    ],
)
async def test_finish_reasons_map_to_terminations(
    mock_server: MockModelServer, finish_reason: str | None, expected: str
) -> None:
    mock_server.policy = scripted([{"content": "partial", "finish_reason": finish_reason}])
    env = AnswerEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == expected
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert env.reward_calls == []
    rollout = await env.run_rollout(make_request(mock_server, "rollout-1"))
    assert rollout.messages[-1] == {"role": "assistant", "content": "partial"}
    await env.aclose()


async def test_max_turns_counts_model_calls(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 2, "right": 3}))])
    env = ToolEnv(max_turns=1)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "max_turns_exceeded"
    assert rollout.rewards == {"correct": 0.0}
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 2, "right": 3})]
    assert [m["role"] for m in rollout.messages] == ["user", "assistant", "tool"]
    assert len(mock_server.requests) == 1

    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    two_turns = await ToolEnv(max_turns=2).run_rollout(make_request(mock_server, "rollout-1"))
    assert two_turns.termination_reason == "finished"
    assert two_turns.rewards == {"correct": 1.0}


async def test_unbound_injected_auth_fails_only_its_rollout(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = scripted(["42"])
    env = AnswerEnv()
    requests = [
        make_request(mock_server, "rollout-0", auth=InjectedAuth("judge")),
        make_request(mock_server, "rollout-1"),
    ]
    outcomes = await env.run_group(requests)
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert outcomes["rollout-1"].termination_reason == "finished"
    assert outcomes["rollout-1"].rewards == {"correct": 1.0}
    assert mock_server.requests_for("rollout-0") == []
    assert "No runtime model-auth provider" in caplog.text
    assert_env_record(caplog, f"{MODEL_FAILED}model_error", exc_type=RuntimeError)
    await env.aclose()


class GroupEnv(AnswerEnv):
    """Individual ``correct`` plus a group-relative ``rank``."""

    reward_keys = ("correct", "rank")

    def __init__(self) -> None:
        super().__init__()
        self.group_calls: list[list[str]] = []

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        self.group_calls.append([r.rollout_id for r in rollouts])
        return {r.rollout_id: {"rank": float(i + 1)} for i, r in enumerate(rollouts)}


async def test_failed_sibling_is_zeroed_and_excluded_from_group(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = scripted(["42"])
    mock_server.inject(Fault.status(500, message="worker crashed"), session="rollout-0")
    env = GroupEnv()
    outcomes = await env.run_group(
        [make_request(mock_server, "rollout-0"), make_request(mock_server, "rollout-1")]
    )
    assert outcomes["rollout-0"].termination_reason == "model_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0, "rank": 0.0}
    assert outcomes["rollout-1"].termination_reason == "finished"
    assert outcomes["rollout-1"].rewards == {"correct": 1.0, "rank": 1.0}
    assert env.group_calls == [["rollout-1"]]
    assert "worker crashed" in caplog.text
    await env.aclose()


class GroupOnlyEnv(AnswerEnv):
    reward_keys = ("rank",)

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        self.reward_calls.append(rollout)
        return None

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        assert all(r.rewards is None for r in rollouts)
        return {r.rollout_id: {"rank": 0.5} for r in rollouts}


async def test_group_only_rewards_become_outcomes(mock_server: MockModelServer) -> None:
    env = GroupOnlyEnv()
    outcomes = await env.run_group(
        [make_request(mock_server, "rollout-0"), make_request(mock_server, "rollout-1")]
    )
    assert {rid: o.rewards for rid, o in outcomes.items()} == {
        "rollout-0": {"rank": 0.5},
        "rollout-1": {"rank": 0.5},
    }
    rollout = await env.run_rollout(make_request(mock_server, "rollout-2"))
    assert rollout.rewards is None and rollout.termination_reason == "finished"
    await env.aclose()


async def test_individual_and_group_rewards_merge(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["42"])
    env = GroupEnv()
    outcomes = await env.run_group(
        [make_request(mock_server, "rollout-0"), make_request(mock_server, "rollout-1")]
    )
    assert outcomes["rollout-0"].rewards == {"correct": 1.0, "rank": 1.0}
    assert outcomes["rollout-1"].rewards == {"correct": 1.0, "rank": 2.0}
    assert list(outcomes["rollout-1"].rewards) == ["correct", "rank"]
    await env.aclose()


class OverlapEnv(GroupEnv):
    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        return {r.rollout_id: {"correct": 1.0, "rank": 1.0} for r in rollouts}


async def test_overlapping_individual_and_group_keys_settle_group_reward_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    env = OverlapEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "group_reward_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0, "rank": 0.0}
    assert "duplicate keys" in caplog.text
    await env.aclose()


class JudgedEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        if rollout.rollout_id == "rollout-0":
            raise JudgeError("judge unavailable: 503")
        return await super().compute_reward(rollout)


async def test_judge_failure_in_compute_reward_settles_only_that_rollout(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = scripted(["42"])
    env = JudgedEnv()
    outcomes = await env.run_group(
        [make_request(mock_server, "rollout-0"), make_request(mock_server, "rollout-1")]
    )
    assert outcomes["rollout-0"].termination_reason == "judge_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert outcomes["rollout-1"].rewards == {"correct": 1.0}
    assert "judge unavailable: 503" in caplog.text
    assert_env_record(
        caplog,
        "base.rollout.reward_failed rollout_id=rollout-0 termination_reason=judge_error: "
        "judge unavailable: 503",
        exc_type=JudgeError,
    )
    await env.aclose()


class KeyErrorEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        return {"correct": float(rollout.example_args["missing"])}


async def test_reward_hook_exception_is_reward_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    env = KeyErrorEnv()
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "reward_error"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert_env_record(
        caplog,
        "base.rollout.reward_failed rollout_id=rollout-0 termination_reason=reward_error: "
        "'missing'",
        exc_type=KeyError,
    )
    await env.aclose()


class BadRewardEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        return {}


async def test_invalid_reward_map_is_a_contract_error(mock_server: MockModelServer) -> None:
    env = BadRewardEnv()
    with pytest.raises(ValueError, match="rewards must contain the env's reward keys"):
        await env.run_group([make_request(mock_server)])
    await env.aclose()


class SplitEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        return {"correct": 1.0 if rollout.split == "eval" else 0.0}


async def test_eval_split_reaches_compute_reward(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["42"])
    env = SplitEnv()
    outcomes = await env.run_group([make_request(mock_server, split="eval")])
    assert outcomes["rollout-0"].rewards == {"correct": 1.0}
    with pytest.raises(ValueError, match="one split"):
        await env.run_group(
            [
                make_request(mock_server, "rollout-1", split="eval"),
                make_request(mock_server, "rollout-2", split="train"),
            ]
        )
    await env.aclose()


class ContextEnv(AnswerEnv):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    async def list_tools(self) -> list[Any]:
        self.events.append("list_tools")
        return []

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        self.events.append("compute_reward")
        return {"correct": 1.0}

    from contextlib import asynccontextmanager as _acm

    @_acm
    async def rollout_context(self, rollout_id: str, example: Any) -> Any:
        self.events.append(f"enter {rollout_id} {example.id}")
        try:
            yield
        finally:
            self.events.append(f"exit {rollout_id}")


async def test_rollout_context_wraps_tools_model_and_reward(mock_server: MockModelServer) -> None:
    env = ContextEnv()
    await env.run_rollout(make_request(mock_server))
    assert env.events == ["enter rollout-0 e", "list_tools", "compute_reward", "exit rollout-0"]
    await env.aclose()


async def test_wire_request_matches_the_sdk_create_call(mock_server: MockModelServer) -> None:
    import openai

    prompt = [{"role": "user", "content": "6*7? ünïcode", "name": None}]
    env = ToolEnv(max_turns=1)
    await env.run_rollout(make_request(mock_server, payload={"prompt_messages": prompt}))
    client = openai.AsyncOpenAI(
        api_key="benchmax-runtime-auth",
        base_url=mock_server.session_url("rollout-0"),
        max_retries=0,
    )
    await client.chat.completions.create(
        model="test-model",
        messages=prompt,  # type: ignore[arg-type]
        tools=list(ToolEnv.tools),
        extra_headers={"Authorization": "Bearer key-rollout-0"},
    )
    await client.close()
    ours, reference = mock_server.requests
    assert (ours.method, ours.path) == (reference.method, reference.path)
    assert ours.body == reference.body  # key order differs between SDK versions
    assert list(ours.body) == ["model", "messages", "tools"]
    compact = json.dumps(ours.body, ensure_ascii=False, separators=(",", ":")).encode()
    assert ours.raw_body == compact  # compact UTF-8, as the SDK sends
    # The headers the wire contract names; the SDK's User-Agent and X-Stainless-*
    # telemetry are not part of it (BaseEnv does not use the SDK, beyond.md §1).
    for name in ("authorization", "content-type", "accept", "content-length"):
        assert ours.headers[name] == reference.headers[name], name
    assert not any(name.startswith("x-stainless") for name in ours.headers)
    await env.aclose()


async def test_auth_is_resolved_before_every_turn(mock_server: MockModelServer) -> None:
    from benchmax.auth import ModelRequestContext

    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7})), "42"])
    auth = CountingAuth()
    request = make_request(mock_server, auth=auth)
    env = ToolEnv()
    rollout = await env.run_rollout(request)
    assert rollout.termination_reason == "finished"
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer attempt-1",
        "Bearer attempt-2",
    ]
    expected = ModelRequestContext(
        base_url=request.base_url, model="test-model", rollout_id="rollout-0"
    )
    assert auth.contexts == [expected, expected]
    await env.aclose()
