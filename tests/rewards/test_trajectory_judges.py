"""Judges that read the whole trajectory: the bounded transcript rendering, the
conversation prompt, and explanations stored with the rollout (a real judge endpoint:
``MockModelServer`` on 127.0.0.1 behind the OpenAI SDK)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.rewards import Judge, JudgeError, Rubric, score_rubrics
from benchmax.rewards.prompts import build_rubric_evaluation_prompt
from benchmax.rewards.transcript import TranscriptLimits, render_transcript
from benchmax.testing import Fault, MockModelServer, message_text
from benchmax.trajectory import SIMULATED_USER_KEY, recording_annotations

TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "My order has not arrived."},
    {
        "role": "assistant",
        "content": "<think>look it up</think>Let me look it up.",
        "reasoning_content": "private thoughts",
        "tool_calls": [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "A17"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call-1", "content": '{"status": "lost"}'},
    {"role": "assistant", "content": "Your parcel was lost."},
    {"role": "user", "content": "Can I get a refund?", SIMULATED_USER_KEY: True},
    {"role": "assistant", "content": "Yes: a refund for A17 is on its way."},
]

RENDERED = """[system]
You are a support agent.

[user]
My order has not arrived.

[assistant]
Let me look it up.
-> tool call lookup_order {"order_id": "A17"}

[tool result lookup_order]
{"status": "lost"}

[assistant]
Your parcel was lost.

[user (simulated)]
Can I get a refund?

[assistant]
Yes: a refund for A17 is on its way."""

RUBRICS = [
    Rubric("Grounded", "Every claim the assistant makes is backed by a tool result."),
    Rubric("Rude", "The assistant is rude to the user.", polarity="negative"),
]


def judge_for(server: MockModelServer) -> Judge:
    return Judge(
        model="judge", base_url=server.base_url, auth=StaticBearerAuth("jk"), max_retries=0
    )


def test_the_rendering_shows_tools_results_and_simulated_users_without_reasoning() -> None:
    assert render_transcript(TRANSCRIPT) == RENDERED


def test_long_parts_are_cut_with_a_marker() -> None:
    limits = TranscriptLimits(
        max_chars=2_000, max_message_chars=300, max_argument_chars=40, max_tool_result_chars=50
    )
    messages = [
        {"role": "user", "content": "x" * 1000},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "function": {"name": "search", "arguments": {"q": "y" * 100}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "z" * 500},
        {"role": "assistant", "content": "done"},
    ]
    text = render_transcript(messages, limits=limits)
    user, call, result, final = text.split("\n\n")
    assert len(user) == 300 and user.endswith(" …[730 more characters]")
    assert user.startswith("[user]\nxxx")
    arguments = call.split("search ", 1)[1]
    assert len(arguments) == 40 and arguments.endswith("more characters]")
    body = result.split("\n", 1)[1]
    assert len(body) == 50 and body.endswith(" …[473 more characters]")
    assert final == "[assistant]\ndone"


def test_an_oversize_transcript_keeps_the_task_and_the_end() -> None:
    limits = TranscriptLimits(max_chars=1_000, max_message_chars=200)
    messages = [{"role": "user", "content": "The task."}]
    for index in range(100):
        messages.append({"role": "assistant", "content": f"turn {index} " + "a" * 150})
        messages.append({"role": "user", "content": f"more {index}", SIMULATED_USER_KEY: True})
    messages.append({"role": "assistant", "content": "The final reply."})
    text = render_transcript(messages, limits=limits)
    assert len(text) <= 1_000
    blocks = text.split("\n\n")
    assert blocks[0] == "[user]\nThe task."
    assert blocks[-1] == "[assistant]\nThe final reply."
    (omission,) = [block for block in blocks if block.startswith("[… ")]
    kept = len(blocks) - 1
    assert omission == f"[… {len(messages) - kept} messages omitted to fit 1000 characters …]"
    # A final reply as long as a message may be still fits.
    messages[-1] = {"role": "assistant", "content": "b" * 5_000}
    text = render_transcript(messages, limits=limits)
    assert len(text) <= 1_000 and text.endswith("more characters]")


def test_limits_and_inputs_are_validated() -> None:
    with pytest.raises(ValueError, match="max_chars must be at least"):
        TranscriptLimits(max_chars=1_000, max_message_chars=1_000)
    with pytest.raises(ValueError, match="max_argument_chars must be a positive integer"):
        TranscriptLimits(max_argument_chars=0)
    with pytest.raises(TypeError, match="list of messages"):
        render_transcript("just text")  # type: ignore[arg-type]


async def test_the_judge_reads_the_whole_trajectory() -> None:
    prompts: list[str] = []

    def judge_policy(body: dict[str, Any]) -> str:
        prompt = message_text(body["messages"][-1]["content"])
        prompts.append(prompt)
        flawed = "Criterion title: Rude" in prompt
        return json.dumps({"score": 0 if flawed else 1, "reasoning": "checked the tool result"})

    async with MockModelServer(judge_policy) as server:
        rewards = await score_rubrics(
            "r1",
            TRANSCRIPT,
            ground_truth=None,
            rubrics=RUBRICS,
            question="Help the customer with a missing order.",
            judge=judge_for(server),
            read_trajectory=True,
        )
    assert rewards == {"rubric_grounded": 1.0, "rubric_rude": 1.0}
    assert len(prompts) == 2
    prompt = prompts[0]
    assert prompt.startswith("You are grading one conversation between an AI assistant")
    assert (
        "Conversation to grade (one [role] block per message; long parts are cut where "
        f"marked):\n{RENDERED}" in prompt
    )
    assert "Task:\nHelp the customer with a missing order." in prompt
    assert "answer 1 when the assistant's conduct clearly shows the quality" in prompt
    assert prompt.endswith('{"score": <0 or 1>, "reasoning": "<brief explanation>"}')
    assert "private thoughts" not in prompt


async def test_without_the_option_the_judge_sees_the_final_reply_as_in_0_2() -> None:
    prompts: list[str] = []

    def judge_policy(body: dict[str, Any]) -> str:
        prompts.append(message_text(body["messages"][-1]["content"]))
        return '{"score": 1}'

    async with MockModelServer(judge_policy) as server:
        await score_rubrics(
            "r1", TRANSCRIPT, ground_truth="ref", rubrics=RUBRICS[:1], question="q",
            judge=judge_for(server),
        )  # fmt: skip
    assert prompts == [
        build_rubric_evaluation_prompt(
            RUBRICS[0],
            question="q",
            response="Yes: a refund for A17 is on its way.",
            ground_truth="ref",
        )
    ]


async def test_explanations_are_stored_with_the_rollout_when_asked() -> None:
    def judge_policy(body: dict[str, Any]) -> str:
        prompt = message_text(body["messages"][-1]["content"])
        if "Criterion title: Rude" in prompt:
            return '{"score": 0, "reasoning": "polite throughout"}'
        return (
            "The refund claim follows the lost status.\n"
            '```json\n{"score": 1, "reasoning": "grounded in lookup_order"}\n```'
        )

    async with MockModelServer(judge_policy) as server:
        judge = judge_for(server)
        with recording_annotations() as annotations:
            await score_rubrics(
                "r1", TRANSCRIPT, ground_truth=None, rubrics=RUBRICS, question="q",
                judge=judge, read_trajectory=True, explain=True,
            )  # fmt: skip
            await score_rubrics(
                "r1", [{"role": "assistant", "content": ""}], ground_truth=None,
                rubrics=RUBRICS[:1], question="q", judge=judge, explain="empty_case",
            )  # fmt: skip
        # Outside a recorded rollout, explain is a no-op.
        await score_rubrics(
            "r2", TRANSCRIPT, ground_truth=None, rubrics=RUBRICS[:1], question="q",
            judge=judge, explain=True,
        )  # fmt: skip
    assert annotations["judge"] == {
        "rubric_grounded": {
            "title": "Grounded",
            "score": 1.0,
            "reward": 1.0,
            "reasoning": "grounded in lookup_order",
            "remarks": "The refund claim follows the lost status.",
        },
        "rubric_rude": {
            "title": "Rude",
            "score": 0.0,
            "reward": 1.0,
            "reasoning": "polite throughout",
        },
    }
    assert annotations["empty_case"] == {
        "rubric_grounded": {"title": "Grounded", "reward": 0.0, "skipped": "empty final reply"}
    }


async def test_options_are_checked_and_judge_failures_propagate() -> None:
    async with MockModelServer(lambda body: '{"score": 1}') as server:
        judge = judge_for(server)
        with pytest.raises(TypeError, match="read_trajectory needs the transcript"):
            await score_rubrics(
                "r1", "text", ground_truth=None, rubrics=RUBRICS, question="q", judge=judge,
                read_trajectory=True,
            )  # fmt: skip
        with pytest.raises(TypeError, match="explain must be"):
            await score_rubrics(
                "r1", TRANSCRIPT, ground_truth=None, rubrics=RUBRICS, question="q",
                judge=judge, explain=3,  # type: ignore[arg-type]
            )  # fmt: skip
        server.inject(Fault.status(500), times=None)
        with pytest.raises(JudgeError, match="rubric 'Grounded' evaluation failed"):
            await score_rubrics(
                "r1", TRANSCRIPT, ground_truth=None, rubrics=RUBRICS[:1], question="q",
                judge=judge, read_trajectory=True,
            )  # fmt: skip
