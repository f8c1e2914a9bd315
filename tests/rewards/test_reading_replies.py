"""Rewards read text the way models write it (beyond.md §7, issue 9 §3).

Content parts are text; reasoning (``<think>`` blocks, text before a lone
``</think>``) is never the answer or the verdict; a judge verdict is the last
object after the reasoning; a judge reply that never leaves its reasoning is a
``JudgeError``. Judge replies travel through the real SDK and ``MockModelServer``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.auth import StaticBearerAuth
from benchmax.envs.base import BaseEnv, BaseRollout
from benchmax.envs.shared_types import Example, RolloutRequest
from benchmax.rewards import (
    Judge,
    JudgeError,
    Rubric,
    citation_score,
    count_search_calls,
    evaluate_single_rubric,
    extract_answer_block,
    extract_completion_text,
    overlap_reward,
    rank_group_rubrics,
    score_group_rubrics,
    score_rubrics,
)
from benchmax.rewards.judge import _parse_json_object
from benchmax.rewards.text import without_reasoning
from benchmax.testing import MockModelServer, RecordedRequest

QUALITY = Rubric("quality", "Good answer.")


def parts(*texts: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text} for text in texts]


def server_judge(server: MockModelServer) -> Judge:
    return Judge(
        model="judge-model",
        base_url=server.base_url,
        auth=StaticBearerAuth("judge-secret"),
        max_retries=0,
    )


# --- answers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("first try <answer>12</answer>, no...</think> <answer>42</answer>", "42"),
        ("<think>maybe <answer>12</answer></think><answer>42</answer>", "42"),
        ("<think>\n<answer>12</answer>\n</think>\n\n 42 ", "42"),
        ("<think>cut off before <answer>12</answer>", ""),
        ("<think>a</think><answer> 1 </answer><think>b</think><answer>2</answer>", "1"),
        # beyond.md §9: tags in any case are reasoning (amends §7's case-sensitive tags)
        ("<THINK><answer>upper-case tags</answer></THINK><answer>42</answer>", "42"),
    ],
)
def test_extract_answer_block_ignores_reasoning(text: str, expected: str) -> None:
    assert extract_answer_block(text) == expected


def test_extract_completion_text_reads_parts_and_keeps_reasoning() -> None:
    transcript = [
        {"role": "user", "content": parts("What is 6 * 7?")},
        {"role": "assistant", "content": parts("<think>6*7=42</think>", " <answer>42</answer> ")},
    ]
    assert extract_completion_text(transcript) == "<think>6*7=42</think> <answer>42</answer>"
    assert extract_answer_block(extract_completion_text(transcript)) == "42"


def test_deterministic_helpers_read_content_parts() -> None:
    transcript = [
        {"role": "assistant", "content": parts("<tool_call>", "<tool_call>")},
        {"role": "tool", "content": parts("<tool_call>")},
        {"role": "assistant", "content": parts("secret ", "reference [Source: a]")},
    ]
    assert count_search_calls(transcript) == 2
    assert overlap_reward(transcript, "secret reference", minimum_overlap=0.9) == 1.0
    chunks = [{"metadata": {"source_id": "a"}}]
    assert citation_score(transcript, chunks) == {"precision": 1.0, "recall": 1.0}


# --- judge verdicts ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # a score drafted inside the reasoning never wins over the final verdict
        ('<think>{"score": 0}</think>{"score": 1}', {"score": 1}),
        ('draft {"score": 0} hmm, no.</think>\n{"score": 1}', {"score": 1}),
        ('{"score": 0}</think>```json\n{"score": 1}\n```', {"score": 1}),
        # several verdicts after the reasoning: the last one counts
        ('{"score": 0} Actually, on reflection: {"score": 1}', {"score": 1}),
        (
            'Verdict:\n```json\n{"score": 0}\n```\nRevised:\n```json\n{"score": 1}\n```',
            {"score": 1},
        ),
        # "last" means the last outermost object, never an object nested inside it
        ('{"score": 1, "detail": {"score": 0}}', {"score": 1, "detail": {"score": 0}}),
        ('x {"score": 1, "detail": {"score": 0}} y', {"score": 1, "detail": {"score": 0}}),
        # an object inside a JSON string is not a second verdict
        (
            'note {"score": 1, "reasoning": "not {\\"score\\": 0}"}',
            {"score": 1, "reasoning": 'not {"score": 0}'},
        ),
        # reasoning quoted inside the verdict is removed like any block (0.2 rule)
        (
            '{"score": 1, "reasoning": "uses <think>x</think> tags"}',
            {"score": 1, "reasoning": "uses  tags"},
        ),
    ],
)
def test_verdict_is_the_last_object_after_reasoning(raw: str, expected: dict[str, Any]) -> None:
    assert _parse_json_object(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        '<think>{"score": 1}',
        '<think>the verdict is {"score": 1}</think>{"score": 0} <think>wait',
        '{"score": 1} <think>but then again',
    ],
)
def test_reply_that_never_leaves_reasoning_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match=r"ended inside <think> reasoning"):
        _parse_json_object(raw)


@pytest.mark.parametrize("raw", ['{"score": 1}</think>', '{"score": 1}</think>no verdict here'])
def test_verdict_only_before_a_lone_close_is_reasoning(raw: str) -> None:
    with pytest.raises(ValueError, match="valid JSON object"):
        _parse_json_object(raw)


async def test_judge_reply_in_content_parts_is_read(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda body: {
        "role": "assistant",
        "content": parts('{"score": 1, ', '"reasoning": "parts"}'),
    }
    parsed, raw = await server_judge(mock_server).request_json("grade", request_id="r")
    assert parsed == {"score": 1, "reasoning": "parts"}
    assert raw == '{"score": 1, "reasoning": "parts"}'


async def test_judge_reply_parts_skip_reasoning_parts(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda body: {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": '{"score": 0}'},
            {"type": "text", "text": '<think>{"score": 0}</think>{"score": 1}'},
        ],
        "reasoning_content": '{"score": 0}',
    }
    evaluation = await evaluate_single_rubric(
        QUALITY, question="q", response="r", judge=server_judge(mock_server)
    )
    assert evaluation.score == 1.0


@pytest.mark.parametrize(
    "content",
    [
        '<think>the draft says {"score": 1}',  # cut off while reasoning
        parts("<think>", 'still thinking {"score": 1}'),
    ],
)
async def test_judge_reply_cut_off_in_reasoning_is_a_judge_error(
    mock_server: MockModelServer, content: Any
) -> None:
    mock_server.policy = lambda body: {"role": "assistant", "content": content}
    with pytest.raises(JudgeError, match=r"rubric 'quality' evaluation failed: .*inside <think>"):
        await evaluate_single_rubric(
            QUALITY, question="q", response="r", judge=server_judge(mock_server)
        )


async def test_judge_reply_with_only_non_text_parts_is_empty(mock_server: MockModelServer) -> None:
    mock_server.policy = lambda body: {
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": '{"score": 1}'}],
    }
    with pytest.raises(JudgeError, match="judge returned an empty response"):
        await server_judge(mock_server).request_json("grade", request_id="r")


# --- what the judge is shown -------------------------------------------------------


async def test_score_rubrics_judges_content_parts(mock_server: MockModelServer) -> None:
    """0.2 returned "" for list content, so a correct answer scored 0 without a judge call."""
    mock_server.policy = lambda body: '{"score": 1}'
    transcript = [
        {"role": "user", "content": parts("q")},
        {"role": "assistant", "content": parts("the answer ", "is 42")},
    ]
    rewards = await score_rubrics(
        "r1",
        transcript,
        ground_truth=None,
        rubrics=[QUALITY],
        question="q",
        judge=server_judge(mock_server),
    )
    assert rewards == {"rubric_quality": 1.0}
    (request,) = mock_server.requests
    assert "the answer is 42" in request.body["messages"][0]["content"]


async def test_the_judge_is_shown_the_answer_without_reasoning(stub_judge, judge) -> None:
    stub_judge.script_scores(1)
    completion = [{"role": "assistant", "content": "<think>SECRET DRAFT</think> final answer"}]
    rewards = await score_rubrics(
        "r1", completion, ground_truth=None, rubrics=[QUALITY], question="q", judge=judge
    )
    assert rewards == {"rubric_quality": 1.0}
    (prompt,) = stub_judge.prompts
    assert "final answer" in prompt
    assert "SECRET DRAFT" not in prompt and "<think>" not in prompt


@pytest.mark.parametrize(
    "completion",
    [
        "<think>never finished",
        "only reasoning</think>",
        [{"role": "assistant", "content": parts("<think>", "x")}],
    ],
)
async def test_a_completion_that_is_only_reasoning_scores_zero_without_judge(
    stub_judge, judge, completion: Any
) -> None:
    rewards = await score_rubrics(
        "r1", completion, ground_truth=None, rubrics=[QUALITY], question="q", judge=judge
    )
    assert rewards == {"rubric_quality": 0.0}
    assert stub_judge.requests == []


async def test_group_scoring_and_ranking_read_parts_and_drop_reasoning(stub_judge, judge) -> None:
    completions = [
        [{"role": "assistant", "content": parts("<think>DRAFT A</think>", "alpha")}],
        [{"role": "assistant", "content": "<think>cut off"}],
        "beta</think> gamma",
    ]
    stub_judge.script_scores(1, 0)
    rewards = await score_group_rubrics(
        ["a", "b", "c"],
        completions,
        ground_truth=None,
        question="q",
        judge=judge,
        rubrics=[QUALITY],
    )
    assert rewards == [{"rubric_quality": 1.0}, {"rubric_quality": 0.0}, {"rubric_quality": 0.0}]
    assert len(stub_judge.prompts) == 2
    assert "alpha" in stub_judge.prompts[0] and "DRAFT A" not in stub_judge.prompts[0]
    assert "gamma" in stub_judge.prompts[1] and "beta" not in stub_judge.prompts[1]

    stub_judge.script(json.dumps({"ranking": [[1], [0]]}))
    ranked = await rank_group_rubrics(
        ["a", "b", "c"],
        completions,
        ground_truth=None,
        question="q",
        judge=judge,
        rubrics=[QUALITY],
    )
    assert ranked == [{"rubric_quality": 0.0}, {"rubric_quality": 0.0}, {"rubric_quality": 1.0}]
    prompt = stub_judge.prompts[-1]
    assert "--- Response 0 ---\nalpha" in prompt and "--- Response 1 ---\ngamma" in prompt
    assert "DRAFT A" not in prompt and "cut off" not in prompt


verdicts = st.dictionaries(
    st.text(alphabet="abcs", min_size=1, max_size=4),
    st.integers(-3, 3) | st.text(alphabet="xy {}<>/", max_size=6),
    max_size=3,
)
prose = st.text(alphabet="abc ,.:\n", max_size=10)


@given(draft=verdicts, verdict=verdicts, before=prose, between=prose, after=prose)
def test_a_draft_in_reasoning_never_beats_the_final_verdict(
    draft: dict[str, Any], verdict: dict[str, Any], before: str, between: str, after: str
) -> None:
    final = json.dumps(verdict)
    drafted = json.dumps(draft)
    assert _parse_json_object(f"{before}<think>{drafted}</think>{between}{final}{after}") == verdict
    assert _parse_json_object(f"{before}{drafted}{between}</think>{final}{after}") == verdict
    assert _parse_json_object(f"{before}{drafted}{between}{final}{after}") == verdict
    with pytest.raises(ValueError, match="inside <think>"):
        _parse_json_object(f"{before}<think>{between}{final}{after}")


# --- inside a real BaseEnv group ---------------------------------------------------


class PartsEnv(BaseEnv):
    """One turn; exact answer plus a judged rubric, both read from the transcript."""

    reward_keys = ("exact", "rubric_quality")
    max_turns = 1

    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge

    async def create_dataset(
        self, split: Any, base_dir: Any, *, max_examples: int | None = None
    ) -> Any:
        raise NotImplementedError

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_answer_block(extract_completion_text(rollout.messages))
        judged = await score_rubrics(
            rollout.rollout_id, rollout.messages, ground_truth="42", rubrics=[QUALITY],
            question="6 * 7?", judge=self.judge,
        )  # fmt: skip
        return {"exact": float(answer == "42"), **judged}


async def test_a_group_answering_in_parts_and_reasoning_is_scored_right() -> None:
    """Issue 9 §3: list content scored 0 and skipped the judge; drafts in <think> won."""
    answers: dict[str, Any] = {
        "parts": parts("<answer>", "42</answer>"),
        "think": "<think>maybe <answer>41</answer></think><answer>42</answer>",
        "template": "first try <answer>41</answer>, no...</think> <answer>42</answer>",
        "draft-only": "<think>it is <answer>42</answer> but let me",
    }

    def policy(body: dict[str, Any], record: RecordedRequest) -> dict[str, Any]:
        if record.session == "judge":
            prompt = body["messages"][0]["content"]
            score = int("42" in prompt.split("Response to grade:")[1].split("\n\n")[0])
            return {
                "content": parts(
                    f'<think>{{"score": {1 - score}}}</think>', f'{{"score": {score}}}'
                )
            }
        return {"content": answers[record.session]}

    async with MockModelServer(policy) as server:
        judge = Judge(
            model="judge", base_url=server.session_url("judge"), auth=StaticBearerAuth("t"),
            max_retries=0,
        )  # fmt: skip
        env = PartsEnv(judge)
        example = Example(
            id="q", payload={"prompt_messages": [{"role": "user", "content": "6 * 7?"}]}
        )
        requests = [
            RolloutRequest(
                rollout_id=name,
                example=example,
                model="policy",
                base_url=server.session_url(name),
                model_auth=StaticBearerAuth("p"),
            )
            for name in answers
        ]
        try:
            outcomes = await env.run_group(requests)
        finally:
            await env.aclose()
        judged = list(server.requests_for("judge"))
    assert {name: o.rewards for name, o in outcomes.items()} == {
        "parts": {"exact": 1.0, "rubric_quality": 1.0},
        "think": {"exact": 1.0, "rubric_quality": 1.0},
        "template": {"exact": 1.0, "rubric_quality": 1.0},
        "draft-only": {"exact": 0.0, "rubric_quality": 0.0},
    }
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    assert len(judged) == 3  # the reply that never left its reasoning is not judged
    assert not any("41" in r.body["messages"][0]["content"] for r in judged)


# --- beyond.md §9: the last verdict only, numeric strings, <think> in any case -----------


@pytest.mark.parametrize(
    "raw",
    [
        '{"score": 1} Revised: {"score": 0,',  # the final verdict is cut off
        '{"score": 1} then {"score": }',  # the final verdict is malformed
        '{"a": 1} {"b": {"c": 2}} {broken',
        '{"score": 1, "detail": {"score": 0}',  # never closed: no inner object stands in
        '```json\n{"score": 0}\n```\nRevised:\n```json\n{"score": 1,\n```',
    ],
)
def test_an_earlier_draft_is_never_used_when_the_last_verdict_does_not_parse(raw: str) -> None:
    with pytest.raises(ValueError, match="its last object does not parse"):
        _parse_json_object(raw)


async def test_a_malformed_last_verdict_is_a_judge_error_end_to_end(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = lambda body: '{"score": 1, "reasoning": "draft"}\nFinal: {"score": 0'
    with pytest.raises(JudgeError, match="does not parse"):
        await evaluate_single_rubric(
            QUALITY, question="q", response="r", judge=server_judge(mock_server)
        )


@pytest.mark.parametrize(
    ("content", "score"),
    [('{"score": "1"}', 1.0), ('{"score": "0"}', 0.0), ('{"score": " 1.0 "}', 1.0)],
)
async def test_a_numeric_string_score_in_the_score_set_is_read_as_its_number(
    mock_server: MockModelServer, content: str, score: float
) -> None:
    mock_server.policy = lambda body: content
    evaluation = await evaluate_single_rubric(
        QUALITY, question="q", response="r", judge=server_judge(mock_server)
    )
    assert evaluation.score == score


async def test_a_half_point_string_score_is_read_on_a_half_point_scale(
    mock_server: MockModelServer,
) -> None:
    rubric = Rubric("Half", "Halves.", score_map={0.0: "no", 0.5: "half", 1.0: "yes"})
    mock_server.policy = lambda body: '{"score": "0.5"}'
    evaluation = await evaluate_single_rubric(
        rubric, question="q", response="r", judge=server_judge(mock_server)
    )
    assert evaluation.score == 0.5


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('<THINK>{"score": 0}</THINK>{"score": 1}', {"score": 1}),
        ('<Think mode="deep">{"score": 0}</Think >{"score": 1}', {"score": 1}),
        ('<think\ttype="x">{"score": 0}</think>\n{"score": 1}', {"score": 1}),
        ('draft {"score": 0}</THINK>{"score": 1}', {"score": 1}),
        # <thinking> is another tag, not reasoning
        ('<thinking>{"score": 0}</thinking>{"score": 1}', {"score": 1}),
    ],
)
def test_think_tags_in_any_case_and_with_attributes_are_reasoning_for_the_judge(
    raw: str, expected: dict[str, Any]
) -> None:
    assert _parse_json_object(raw) == expected


def test_an_unclosed_upper_case_think_is_refused_by_the_judge() -> None:
    with pytest.raises(ValueError, match="inside <think>"):
        _parse_json_object('<THINK type="r">{"score": 1}')


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("<THINK><answer>7</answer></THINK><answer>42</answer>", "42"),
        ('<think budget="9"><answer>7</answer></think> <answer>42</answer>', "42"),
        ("<answer>7</answer></Think><answer>42</answer>", "42"),
        ("<Think><answer>7</answer>", ""),
    ],
)
def test_think_tags_in_any_case_and_with_attributes_are_reasoning_for_answers(
    text: str, answer: str
) -> None:
    assert extract_answer_block(text) == answer
    assert without_reasoning(text).count("<answer>7") == 0
