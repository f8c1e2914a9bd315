"""Simulated users: ``BaseEnv.user_turn`` and ``SimulatedUser`` against real local servers
(one mock server plays the policy, another the user), failure paths included."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from tests.envs.base.support import AnswerEnv, ToolEnv, make_request, tool_reply

from benchmax.auth import InjectedAuth, StaticBearerAuth, bind_model_auth
from benchmax.envs import BaseRollout, Example, RolloutFailure
from benchmax.testing import Fault, MockModelServer, ToyChatTemplate, scripted
from benchmax.tools import SimulatedUser
from benchmax.training import collect_group, to_training_samples
from benchmax.trajectory import SIMULATED_USER_KEY, is_simulated_user

PAYLOAD = {
    "prompt_messages": [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Hi, my order has not arrived."},
    ],
    "answer": "refund",
    "persona": "An impatient customer called Dana.",
    "goal": "Get a refund for order A17.",
}
SECRET = "sk-user-secret-4711"
OPENING = "(The conversation begins: write your first message to the assistant.)"
SILENT = "(The assistant replied without any text.)"


class ChatEnv(AnswerEnv):
    """``AnswerEnv`` whose user is a ``SimulatedUser`` (``user`` set per test)."""

    max_turns = 6

    def __init__(self, user: SimulatedUser, **limits: Any) -> None:
        super().__init__(**limits)
        self.user = user

    async def user_turn(self, rollout_id: str, messages: Any, example: Example[Any]) -> str | None:
        return await self.user.reply(rollout_id, messages, example)


def simulated(server: MockModelServer, **options: Any) -> SimulatedUser:
    return SimulatedUser(
        model="user-model",
        base_url=server.base_url,
        auth=options.pop("auth", StaticBearerAuth(SECRET)),
        **options,
    )


async def run_chat(
    policy_replies: list[Any], user_replies: list[Any], **options: Any
) -> tuple[BaseRollout, MockModelServer, MockModelServer]:
    limits = options.pop("limits", {})
    async with (
        MockModelServer(scripted(policy_replies)) as policy,
        MockModelServer(scripted(user_replies)) as user,
    ):
        env = ChatEnv(simulated(user, **options), **limits)
        rollout = await env.run_rollout(make_request(policy, payload=PAYLOAD))
        await env.aclose()
    return rollout, policy, user


async def test_a_simulated_user_talks_until_its_stop_marker() -> None:
    rollout, policy, user = await run_chat(
        ["Sorry! Which order?", "A refund for A17 is on its way."],
        ["It is order A17. I want my money back.", "Thanks. ###STOP###"],
    )
    assert rollout.termination_reason == "finished"
    assert rollout.rewards == {"correct": 1.0}
    roles = [(m["role"], is_simulated_user(m)) for m in rollout.messages]
    assert roles == [
        ("system", False),
        ("user", False),
        ("assistant", False),
        ("user", True),
        ("assistant", False),
    ]
    assert rollout.messages[3] == {
        "role": "user",
        "content": "It is order A17. I want my money back.",
        SIMULATED_USER_KEY: True,
    }
    # The policy never sees the marker key.
    second = policy.requests[1].body["messages"]
    assert second[3] == {"role": "user", "content": "It is order A17. I want my money back."}
    assert SIMULATED_USER_KEY.encode() not in b"".join(r.raw_body for r in policy.requests)
    # The user's model sees the conversation from its side, with persona and goal.
    first_user_call = user.requests[0].body
    assert first_user_call["model"] == "user-model"
    system, *turns = first_user_call["messages"]
    assert system["role"] == "system"
    assert "An impatient customer called Dana." in system["content"]
    assert "Get a refund for order A17." in system["content"]
    assert "###STOP###" in system["content"]
    assert turns == [
        {"role": "user", "content": OPENING},
        {"role": "assistant", "content": "Hi, my order has not arrived."},
        {"role": "user", "content": "Sorry! Which order?"},
    ]
    assert len(user.requests[1].body["messages"]) == 6
    assert user.requests[0].headers["authorization"] == f"Bearer {SECRET}"


async def test_the_default_hook_keeps_requests_byte_identical() -> None:
    class ExplicitNone(AnswerEnv):
        async def user_turn(self, rollout_id: str, messages: Any, example: Any) -> None:
            self.asked = list(messages)
            return None

    bodies = []
    for env in (AnswerEnv(max_turns=3), ExplicitNone(max_turns=3)):
        async with MockModelServer(scripted(["42, a refund"])) as server:
            rollout = await env.run_rollout(make_request(server, payload=PAYLOAD))
            bodies.append([request.raw_body for request in server.requests])
        await env.aclose()
        assert rollout.termination_reason == "finished"
        assert len(rollout.messages) == 3
    assert bodies[0] == bodies[1] and len(bodies[0]) == 1
    assert [m["role"] for m in env.asked] == ["system", "user", "assistant"]


async def test_tool_turns_do_not_ask_the_user() -> None:
    asked: list[int] = []

    class ToolChat(ToolEnv):
        async def user_turn(self, rollout_id: str, messages: Any, example: Any) -> str | None:
            asked.append(len(messages))
            return "and 6 times 8?" if len(asked) == 1 else None

    env = ToolChat(max_turns=4)
    replies = [tool_reply(("multiply", {"left": 6, "right": 7})), "42", "48"]
    async with MockModelServer(scripted(replies)) as server:
        rollout = await env.run_rollout(make_request(server))
    await env.aclose()
    assert rollout.termination_reason == "finished"
    assert asked == [4, 6]  # after the two answers, never after the tool call
    assert [m["role"] for m in rollout.messages] == [
        "user", "assistant", "tool", "assistant", "user", "assistant",
    ]  # fmt: skip


async def test_a_stop_at_once_ends_after_one_reply() -> None:
    rollout, policy, user = await run_chat(["A refund is on its way."], ["###STOP###"])
    assert rollout.termination_reason == "finished"
    assert len(policy.requests) == 1 and len(user.requests) == 1
    assert rollout.messages[-1]["role"] == "assistant"


async def test_a_custom_stop_marker_and_inline_thinking() -> None:
    rollout, _, _ = await run_chat(
        ["Which order?", "Done: refund."],
        ["<think>they asked which</think>Order A17.", "<think>ok</think>[[bye]]"],
        stop_marker="[[bye]]",
    )
    assert rollout.termination_reason == "finished"
    assert rollout.messages[3]["content"] == "Order A17."


async def test_the_users_reasoning_is_read_by_the_projects_one_rule() -> None:
    # Tags in any case and with attributes, as answers and judge replies are read.
    rollout, _, _ = await run_chat(
        ["Which order?", "Done: refund."],
        ['<THINK mode="x">they asked which</Think >Order A17.', "###STOP###"],
    )
    assert rollout.messages[3]["content"] == "Order A17."


async def test_turn_limits_are_shared_with_max_turns() -> None:
    rollout, policy, user = await run_chat(
        ["Which order?"] * 3, ["Still waiting."] * 3, limits={"max_turns": 3}
    )
    assert rollout.termination_reason == "max_turns_exceeded"
    assert rollout.rewards == {"correct": 0.0}
    assert len(policy.requests) == 3 and len(user.requests) == 3
    assert is_simulated_user(rollout.messages[-1])  # what the user still wanted


@pytest.mark.parametrize("status", [401, 500])
async def test_a_failing_user_endpoint_settles_as_simulated_user_error(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with (
        MockModelServer(scripted(["Which order?"])) as policy,
        MockModelServer(scripted(["A17"])) as user,
    ):
        user.inject(Fault.status(status), times=None)
        env = ChatEnv(simulated(user, max_retries=1))
        rollout = await env.run_rollout(make_request(policy, payload=PAYLOAD))
        await env.aclose()
    assert rollout.termination_reason == "simulated_user_error"
    assert rollout.rewards == {"correct": 0.0}
    assert len(policy.requests) == 1
    assert len(user.requests) == (1 if status == 401 else 2)  # 401 is not retried
    failed = [r for r in caplog.records if "base.rollout.user_failed" in r.getMessage()]
    assert failed and f"HTTP {status}" in failed[0].getMessage()
    assert SECRET not in caplog.text
    assert SECRET not in repr(env.user)


async def test_an_unreachable_user_endpoint_settles_as_simulated_user_error() -> None:
    async with MockModelServer(scripted(["Which order?"])) as policy:
        async with MockModelServer(scripted(["unused"])) as gone:
            url = gone.base_url
        user = SimulatedUser(model="u", base_url=url, auth=StaticBearerAuth(SECRET), max_retries=0)
        env = ChatEnv(user)
        rollout = await env.run_rollout(make_request(policy, payload=PAYLOAD))
        await env.aclose()
    assert rollout.termination_reason == "simulated_user_error"


async def test_a_slow_user_endpoint_times_out_as_simulated_user_error() -> None:
    async with (
        MockModelServer(scripted(["Which order?"])) as policy,
        MockModelServer(scripted(["A17"])) as user,
    ):
        user.inject(Fault.delay(5.0))
        env = ChatEnv(simulated(user, timeout=0.2, max_retries=0))
        rollout = await env.run_rollout(make_request(policy, payload=PAYLOAD))
        await env.aclose()
    assert rollout.termination_reason == "simulated_user_error"


async def test_credentials_are_injected_by_name() -> None:
    async with (
        MockModelServer(scripted(["Which order?", "Refund sent."])) as policy,
        MockModelServer(scripted(["A17", "###STOP###"])) as user,
    ):
        env = ChatEnv(simulated(user, auth=InjectedAuth("user")))
        with bind_model_auth({"user": StaticBearerAuth(SECRET)}):
            rollout = await env.run_rollout(make_request(policy, payload=PAYLOAD))
        unbound = await env.run_rollout(make_request(policy, "rollout-1", payload=PAYLOAD))
        await env.aclose()
        assert user.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert rollout.termination_reason == "finished"
    assert unbound.termination_reason == "simulated_user_error"  # nothing bound: no request
    assert len(user.requests) == 2
    restored = pickle.loads(cloudpickle.dumps(env.user))
    assert restored == env.user and restored.auth == InjectedAuth("user")


async def test_a_payload_without_a_goal_settles_as_simulated_user_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = {k: v for k, v in PAYLOAD.items() if k != "goal"}
    async with (
        MockModelServer(scripted(["Which order?"])) as policy,
        MockModelServer(scripted(["A17"])) as user,
    ):
        env = ChatEnv(simulated(user))
        rollout = await env.run_rollout(make_request(policy, payload=payload))
        await env.aclose()
        assert user.requests == []
    assert rollout.termination_reason == "simulated_user_error"
    assert "'goal'" in caplog.text


async def test_hook_results_and_errors() -> None:
    class Hook(AnswerEnv):
        max_turns = 3

        def __init__(self, answer: Any) -> None:
            super().__init__()
            self.answer = answer

        async def user_turn(self, rollout_id: str, messages: Any, example: Any) -> Any:
            if isinstance(self.answer, BaseException):
                raise self.answer
            return self.answer

    async def reason(answer: Any) -> str:
        env = Hook(answer)
        async with MockModelServer(scripted(["hello"], when_exhausted="repeat_last")) as server:
            rollout = await env.run_rollout(make_request(server, payload=PAYLOAD))
        await env.aclose()
        return rollout.termination_reason

    assert await reason(RolloutFailure("user_left", "the user hung up")) == "user_left"
    assert await reason(RuntimeError("boom")) == "simulated_user_error"
    assert await reason("   ") == "simulated_user_error"
    with pytest.raises(TypeError, match="user_turn must return a string or None") as raised:
        await reason(42)
    assert "benchmax: raised by Hook.user_turn" in raised.value.__notes__


async def test_send_reasoning_never_sends_the_marker() -> None:
    replies = [{"content": "Which order?", "reasoning_content": "ask"}, "Refund sent."]
    rollout, policy, _ = await run_chat(
        replies, ["A17", "###STOP###"], limits={"send_reasoning": True}
    )
    assert rollout.termination_reason == "finished"
    sent = policy.requests[1].body["messages"]
    assert sent[2]["reasoning_content"] == "ask"
    assert sent[3] == {"role": "user", "content": "A17"}
    assert is_simulated_user(rollout.messages[3])


async def test_simulated_user_tokens_are_not_trainable() -> None:
    async with (
        MockModelServer(
            scripted(["Which order?", "Refund sent."]), tokens=True, chat_template="chatml"
        ) as policy,
        MockModelServer(scripted(["Order A17.", "###STOP###"])) as user,
    ):
        env = ChatEnv(simulated(user), record_tokens=True)
        group = await collect_group(env, [make_request(policy, payload=PAYLOAD)])
        await env.aclose()
    (trajectory,) = group.trajectories
    assert trajectory.termination_reason == "finished" and trajectory.trainable
    assert is_simulated_user(trajectory.messages[3])
    assert len(trajectory.model_calls) == 2  # the user's model calls are not the policy's
    (sample,) = to_training_samples(trajectory)
    toy = ToyChatTemplate()
    pairs = list(zip(sample["completion_ids"], sample["completion_mask"], strict=True))
    environment = toy.decode([t for t, m in pairs if m == 0])
    sampled = toy.decode([t for t, m in pairs if m == 1])
    assert "Order A17." in environment and "Order A17." not in sampled
    assert environment == "\n<|im_start|>user\nOrder A17.<|im_end|>\n<|im_start|>assistant\n"
    assert "Which order?" in sampled and "Refund sent." in sampled


def test_settings_are_validated() -> None:
    auth = StaticBearerAuth(SECRET)
    with pytest.raises(ValueError, match="stop_marker"):
        SimulatedUser(model="m", base_url="http://x", auth=auth, stop_marker="")
    with pytest.raises(ValueError, match=r"\{persona\}"):
        SimulatedUser(model="m", base_url="http://x", auth=auth, instructions="Be {mood}.")
    with pytest.raises(ValueError, match="timeout"):
        SimulatedUser(model="m", base_url="http://x", auth=auth, timeout=0)
    with pytest.raises(ValueError, match="may not set"):
        SimulatedUser(model="m", base_url="http://x", auth=auth, sampling_args={"model": "x"})
    with pytest.raises(TypeError, match="ModelAuth"):
        SimulatedUser(model="m", base_url="http://x", auth="token")  # type: ignore[arg-type]
    user = SimulatedUser(
        model="m", base_url="http://x", auth=auth, sampling_args={"temperature": 0.7}
    )
    assert SECRET not in repr(user)
    assert pickle.loads(pickle.dumps(user)) == user
    assert json.dumps(dict(user.sampling_args)) == '{"temperature": 0.7}'


def test_the_user_side_of_the_conversation() -> None:
    user = SimulatedUser(model="m", base_url="http://x", auth=StaticBearerAuth(SECRET))
    messages = [
        {"role": "system", "content": "policy system prompt"},
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "c"}]},
        {"role": "tool", "tool_call_id": "c", "content": "secret tool output"},
        {"role": "assistant", "content": [{"type": "text", "text": "Found it."}]},
        {"role": "user", "content": "Great.", SIMULATED_USER_KEY: True},
        {"role": "assistant", "content": None, "reasoning_content": "hidden"},
    ]
    sent = user.request_messages(messages, Example(id="e", payload=PAYLOAD))
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert sent[1]["content"] == OPENING
    assert sent[3]["content"] == "Let me look.\n\nFound it."
    assert sent[5]["content"] == SILENT  # the last reply had no text to show
    text = json.dumps(sent)
    assert "secret tool output" not in text and "hidden" not in text
    assert "policy system prompt" not in text


def test_bundles_carry_the_user(tmp_path: Path) -> None:
    user = SimulatedUser(model="m", base_url="http://x", auth=InjectedAuth("user"))
    path = tmp_path / "u.pkl"
    path.write_bytes(cloudpickle.dumps(user))
    assert pickle.loads(path.read_bytes()) == user


# -- the user's own request is well-formed for strict chat templates (issue 28 kind 11) -----


def strict_template(reply: str) -> Any:
    """A user endpoint whose chat template is as strict as Mistral's and Gemma's: an
    optional system prompt, then roles alternating from user to user, else HTTP 400 with
    the template's own words."""

    def policy(body: dict[str, Any]) -> str:
        roles = [m["role"] for m in body["messages"]]
        if roles and roles[0] == "system":
            roles = roles[1:]
        expected = ["user" if i % 2 == 0 else "assistant" for i in range(len(roles))]
        if not roles or roles != expected or roles[-1] != "user":
            raise Fault.status(
                400,
                message="Conversation roles must alternate user/assistant/user/assistant/...",
            )
        if any(not m["content"].strip() for m in body["messages"]):
            raise Fault.status(400, message="empty message")
        return reply

    return policy


CONVERSATIONS = {
    "opened-by-the-user": [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Hi, my order has not arrived."},
    ],
    "two-user-messages-in-a-row": [
        {"role": "user", "content": "Hi."},
        {"role": "user", "content": "My order has not arrived."},
    ],
    "opened-by-the-assistant": [
        {"role": "system", "content": "You are a support agent."},
        {"role": "assistant", "content": "Welcome! How can I help?"},
    ],
    "no-user-message": [{"role": "system", "content": "You are a support agent."}],
}


@pytest.mark.parametrize("prompt", CONVERSATIONS.values(), ids=CONVERSATIONS.keys())
async def test_a_strict_chat_template_accepts_every_request_of_the_user(
    prompt: list[dict[str, Any]],
) -> None:
    policy_replies = [
        tool_reply(("multiply", {"left": 6, "right": 7}), content="Let me check."),
        "<think>The user wants A17.</think>Which order?",
        "<think>only reasoning, nothing to show</think>",
        "A refund for A17 is on its way.",
    ]
    payload = {**PAYLOAD, "prompt_messages": prompt}
    async with (
        MockModelServer(scripted(policy_replies)) as policy,
        MockModelServer(strict_template("It is order A17.")) as user,
    ):

        class ToolChat(ChatEnv, ToolEnv):  # type: ignore[misc]
            max_turns = 4

        env = ToolChat(simulated(user))
        rollout = await env.run_rollout(make_request(policy, payload=payload))
        await env.aclose()
    # Every request of the user was accepted (a refusal ends it as simulated_user_error).
    assert rollout.termination_reason == "max_turns_exceeded"
    assert sum(is_simulated_user(m) for m in rollout.messages) == 3
    for request in user.requests:
        sent = request.body["messages"]
        text = json.dumps(sent)
        assert "The user wants A17" not in text  # the assistant's reasoning stays hidden
        assert "only reasoning" not in text
    first = user.requests[0].body["messages"]
    assert first[1]["role"] == "user"
