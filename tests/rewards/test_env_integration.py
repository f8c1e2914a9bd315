"""Rewards inside a real ``BaseEnv`` group: judge failures settle one rollout, diversity scales.

One ``MockModelServer`` plays both parts: the policy model answers on each
rollout's session, the judge answers on the ``judge`` session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmax.auth import InjectedAuth, StaticBearerAuth, bind_model_auth
from benchmax.envs.base import BaseEnv, BaseRollout
from benchmax.envs.shared_types import Example, RolloutRequest
from benchmax.rewards import (
    Judge,
    NgramDiversityConfig,
    Rubric,
    extract_completion_text,
    scale_by_diversity,
    score_group_rubrics,
    score_rubrics,
)
from benchmax.testing import MockModelServer, RecordedRequest

RUBRICS = (
    Rubric("Correct", "Names the right city."),
    Rubric("Hallucination", "Invents facts.", polarity="negative"),
)
EXAMPLE = Example(
    id="capital",
    payload={
        "prompt_messages": [{"role": "user", "content": "Capital of France?"}],
        "answer": "Paris",
    },
)


def grade(prompt: str) -> str:
    """The judge: correct when the graded response says Paris; chokes on 'poison'."""
    response = prompt.split("Response to grade:\n", 1)[1].split("\n\n", 1)[0]
    if "poison" in response:
        return "I will not grade this."
    if "Hallucination" in prompt:
        return json.dumps({"score": 0, "reasoning": "no flaw"})
    return json.dumps({"score": 1 if "Paris" in response else 0, "reasoning": "checked"})


def make_policy(answers: Mapping[str, str]):
    def policy(body: dict[str, Any], record: RecordedRequest) -> str:
        if record.session == "judge":
            return grade(body["messages"][0]["content"])
        return answers[record.session]

    return policy


class RubricEnv(BaseEnv):
    reward_keys = ("rubric_correct", "rubric_hallucination")
    max_turns = 1

    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        raise NotImplementedError

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return await score_rubrics(
            rollout.rollout_id,
            rollout.messages,
            ground_truth=rollout.example_args["answer"],
            rubrics=RUBRICS,
            question="Capital of France?",
            judge=self.judge,
        )


class GroupRubricEnv(RubricEnv):
    reward_keys = ("rubric_correct",)

    async def compute_reward(self, rollout: BaseRollout) -> None:
        return None

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> dict[str, dict[str, float]]:
        ids = [rollout.rollout_id for rollout in rollouts]
        rewards = await score_group_rubrics(
            ids,
            [rollout.messages for rollout in rollouts],
            ground_truth="Paris",
            question="Capital of France?",
            judge=self.judge,
            rubrics=RUBRICS[:1],
        )
        return dict(zip(ids, rewards, strict=True))


class DiverseEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        raise NotImplementedError

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> dict[str, dict[str, float]]:
        texts = [extract_completion_text(rollout.messages) for rollout in rollouts]
        rewards = [{"correct": 1.0 if text else 0.0} for text in texts]
        scaled, _ = await scale_by_diversity(
            rewards, texts, NgramDiversityConfig(similarity_threshold=0.9)
        )
        return {rollout.rollout_id: r for rollout, r in zip(rollouts, scaled, strict=True)}


def requests(server: MockModelServer, ids: Sequence[str]) -> list[RolloutRequest]:
    return [
        RolloutRequest(
            rollout_id=rollout_id,
            example=EXAMPLE,
            model="policy-model",
            base_url=server.session_url(rollout_id),
            model_auth=StaticBearerAuth("policy-token"),
        )
        for rollout_id in ids
    ]


def judge_for(server: MockModelServer, **overrides: Any) -> Judge:
    return Judge(
        model="judge-model",
        base_url=server.session_url("judge"),
        auth=overrides.pop("auth", InjectedAuth("judge")),
        max_retries=0,
        **overrides,
    )


async def test_failing_judge_settles_only_that_rollout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = {"r1": "It is Paris.", "r2": "poison", "r3": "Lyon"}
    async with MockModelServer(make_policy(answers)) as server:
        env = RubricEnv(judge_for(server))
        try:
            with (
                bind_model_auth({"judge": StaticBearerAuth("judge-token")}),
                caplog.at_level(logging.ERROR),
            ):
                outcomes = await env.run_group(requests(server, ["r1", "r2", "r3"]))
        finally:
            await env.aclose()
        judge_requests = server.requests_for("judge")
    assert outcomes["r1"].termination_reason == "finished"
    assert outcomes["r1"].rewards == {"rubric_correct": 1.0, "rubric_hallucination": 1.0}
    assert outcomes["r3"].rewards == {"rubric_correct": 0.0, "rubric_hallucination": 1.0}
    assert outcomes["r2"].termination_reason == "judge_error"
    assert outcomes["r2"].rewards == {"rubric_correct": 0.0, "rubric_hallucination": 0.0}
    assert "valid JSON object" in caplog.text and "r2" in caplog.text
    assert "judge-token" not in caplog.text
    assert {r.headers["authorization"] for r in judge_requests} == {"Bearer judge-token"}
    assert all("Reference answer" in r.body["messages"][0]["content"] for r in judge_requests)


async def test_unbound_judge_auth_is_a_judge_error_for_every_rollout() -> None:
    answers = {"r1": "Paris", "r2": "Paris"}
    async with MockModelServer(make_policy(answers)) as server:
        env = RubricEnv(judge_for(server))
        try:
            outcomes = await env.run_group(requests(server, ["r1", "r2"]))
        finally:
            await env.aclose()
        assert server.requests_for("judge") == []
    assert {o.termination_reason for o in outcomes.values()} == {"judge_error"}


async def test_group_judge_failure_settles_the_whole_group() -> None:
    answers = {"r1": "Paris", "r2": "poison"}
    async with MockModelServer(make_policy(answers)) as server:
        env = GroupRubricEnv(judge_for(server, auth=StaticBearerAuth("t")))
        try:
            outcomes = await env.run_group(requests(server, ["r1", "r2"]))
        finally:
            await env.aclose()
    assert {o.termination_reason for o in outcomes.values()} == {"judge_error"}
    assert all(o.rewards == {"rubric_correct": 0.0} for o in outcomes.values())


async def test_group_rubric_scoring_succeeds_for_good_answers() -> None:
    answers = {"r1": "Paris", "r2": "Lyon"}
    async with MockModelServer(make_policy(answers)) as server:
        env = GroupRubricEnv(judge_for(server, auth=StaticBearerAuth("t")))
        try:
            outcomes = await env.run_group(requests(server, ["r1", "r2"]))
        finally:
            await env.aclose()
    assert outcomes["r1"].rewards == {"rubric_correct": 1.0}
    assert outcomes["r2"].rewards == {"rubric_correct": 0.0}


async def test_diversity_halves_duplicates_and_keeps_unique_answers() -> None:
    answers = {"a": "Paris", "b": "Paris", "c": "The capital is Paris, France."}
    async with MockModelServer(make_policy(answers)) as server:
        env = DiverseEnv()
        try:
            outcomes = await env.run_group(requests(server, ["a", "b", "c"]))
            single = await env.run_group(requests(server, ["a"]))
        finally:
            await env.aclose()
    assert outcomes["a"].rewards == {"correct": 0.5}
    assert outcomes["b"].rewards == {"correct": 0.5}
    assert outcomes["c"].rewards == {"correct": 1.0}
    assert single["a"].rewards == {"correct": 1.0}
