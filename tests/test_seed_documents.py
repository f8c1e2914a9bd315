"""The benchmax examples of the user's documents work as written, against real local servers.

Two documents are covered (both in ``/work/shared/seeds``):

* the BenchMax 0.2.0 README: ``AnswerEnv``, the judge-backed rubric snippet, bundling with
  ``dump_bundle``/``bundle_digest``, the compatibility rule and the breaking-version claims;
* the castform SDK overview: ``MyEnv`` over ``{"prompt", "ground_truth"}`` JSONL rows split
  80/20, bundled with ``dump_bundle(MyEnv)`` (the ``castform`` upload/launch calls are not part
  of this project and are left out).

The environment classes below repeat the documents' call shapes exactly; the only additions are
what the documents leave open: the README's ``row_to_example=...`` placeholder and the
``reward_keys`` declaration the 0.2 contract requires of ``MyEnv``.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import benchmax.envs
import benchmax.envs.dataset
from benchmax.auth import InjectedAuth, StaticBearerAuth, bind_model_auth
from benchmax.bundle import (
    Bundle,
    BundlingError,
    IncompatibleBenchmaxError,
    IncompatiblePythonError,
    IncompatibleRuntimeError,
    bundle_digest,
    dump_bundle,
    load_bundle,
    validate_bundle_compatibility,
)
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    Dataset,
    DatasetSplit,
    Example,
    JsonlDataset,
    RolloutRequest,
    canonical_example_id,
)
from benchmax.results import read_results
from benchmax.rewards import (
    Judge,
    JudgeError,
    Rubric,
    extract_completion_text,
    score_rubrics,
)
from benchmax.runner import RunConfig, run_environment
from benchmax.testing import Fault, MockModelServer, RecordedRequest, message_text

# --------------------------------------------------------------------------------------------
# The README's AnswerEnv, with the ``row_to_example=...`` placeholder filled in.
# --------------------------------------------------------------------------------------------


def answer_row_to_example(row: dict) -> Example:
    """One ``{"question", "answer"}`` row as a single-turn chat example."""
    payload = {
        "prompt_messages": [{"role": "user", "content": row["question"]}],
        "question": row["question"],
        "answer": row["answer"],
    }
    return Example(id=canonical_example_id(payload), payload=payload)


class AnswerEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=answer_row_to_example)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_completion_text(rollout.messages)
        return {"correct": float(answer == rollout.example_args["answer"])}


# The README's judge snippet: two rubrics, the second one negative.
RUBRICS = [
    Rubric("Correctness", "The answer is factually correct."),
    Rubric(
        "Fabrication",
        "The answer invents unsupported facts.",
        polarity="negative",
    ),
]


class JudgedAnswerEnv(AnswerEnv):
    """AnswerEnv scored by the README's ``score_rubrics`` call instead of exact match."""

    reward_keys = ("rubric_correctness", "rubric_fabrication")

    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return await score_rubrics(
            rollout.rollout_id,
            rollout.messages,
            ground_truth=rollout.example_args["answer"],
            rubrics=RUBRICS,
            question=rollout.example_args["question"],
            judge=self.judge,
        )


# --------------------------------------------------------------------------------------------
# The castform overview's MyEnv (complete-script version) plus the required reward_keys.
# --------------------------------------------------------------------------------------------


class MyEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ):
        return JsonlDataset(
            base_dir / f"{split}.jsonl",
            row_to_example=self._example,
            max_examples=max_examples,
        )

    def _example(self, row: dict) -> Example:
        payload = {
            "prompt_messages": [
                {
                    "role": "system",
                    "content": "answer the question concisely. put your answer in <answer> tags.",
                },
                {"role": "user", "content": row["prompt"]},
            ],
            "ground_truth": row["ground_truth"],
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        match = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
        answer = match.group(1).strip().lower() if match else ""
        expected = str(rollout.example_args.get("ground_truth", "")).strip().lower()
        return {"correct": 1.0 if answer == expected else 0.0}


def generate_my_examples(n: int) -> list[dict[str, str]]:
    """The overview's two rows followed by arithmetic questions, ``n`` rows in all."""
    rows = [
        {"prompt": "what is 2+2?", "ground_truth": "4"},
        {"prompt": "capital of France?", "ground_truth": "Paris"},
    ]
    for left in range(3, n + 1):
        rows.append({"prompt": f"what is {left}+{left * 2}?", "ground_truth": str(left * 3)})
    return rows[:n]


def write_split_dataset(base_dir: Path, n: int = 10) -> tuple[list[dict], list[dict]]:
    """Split the rows 80/20 as the overview does and write ``train.jsonl``/``eval.jsonl``."""
    dataset = generate_my_examples(n=n)
    split = int(len(dataset) * 0.8)
    train_data, eval_data = dataset[:split], dataset[split:]
    for name, rows in (("train", train_data), ("eval", eval_data)):
        lines = "".join(json.dumps(row) + "\n" for row in rows)
        (base_dir / f"{name}.jsonl").write_text(lines, encoding="utf-8")
    return train_data, eval_data


def solve(prompt: str) -> str:
    """What a competent model answers to the castform questions."""
    arithmetic = re.fullmatch(r"what is (\d+)\+(\d+)\?", prompt)
    if arithmetic:
        return str(int(arithmetic[1]) + int(arithmetic[2]))
    return {"capital of France?": "Paris"}[prompt]


def tagged_answers(body: dict[str, Any], request: RecordedRequest) -> str:
    """Answer in ``<answer>`` tags, except that rollout ``.r1`` forgets the tags."""
    messages = body["messages"]
    assert "<answer> tags" in message_text(messages[0]["content"])
    answer = solve(message_text(messages[-1]["content"]))
    if request.session.endswith(".r1"):
        return answer
    # Case and surrounding whitespace inside the tags do not matter to the reward.
    return f"Sure. <answer> {answer.upper()} </answer>"


# --------------------------------------------------------------------------------------------
# Shared values for the README tests.
# --------------------------------------------------------------------------------------------

ANSWER_ROWS = [
    {"question": "Which planet is the largest? One word.", "answer": "Jupiter"},
    {"question": "What is the capital of France? One word.", "answer": "Paris"},
]


def write_answer_rows(base_dir: Path) -> None:
    for split in ("train", "eval"):
        lines = "".join(json.dumps(row) + "\n" for row in ANSWER_ROWS)
        (base_dir / f"{split}.jsonl").write_text(lines, encoding="utf-8")


def answer_policy(body: dict[str, Any], request: RecordedRequest) -> str:
    """The right answer, except in sessions whose name starts with ``wrong``."""
    question = message_text(body["messages"][-1]["content"])
    answer = next(row["answer"] for row in ANSWER_ROWS if row["question"] == question)
    return "Saturn" if request.session.startswith("wrong") else answer


def requests_for(
    example: Example, server: MockModelServer, sessions: list[str], **options: Any
) -> list[RolloutRequest]:
    return [
        RolloutRequest(
            rollout_id=session,
            example=example,
            model="policy-model",
            base_url=server.session_url(session),
            model_auth=StaticBearerAuth("policy-key"),
            **options,
        )
        for session in sessions
    ]


GOOD_COMPLETION = "The capital of France is Paris."
FABRICATED_COMPLETION = "The capital of France is Lyon, which was founded on the moon."
QUESTION = "What is the capital of France? One word."
REFERENCE = "Paris"


def judge_prompt(body: Mapping[str, Any]) -> str:
    return message_text(body["messages"][-1]["content"])


def fair_judge(body: dict[str, Any]) -> str:
    """Scores exactly the README's two rubrics by looking at the response under review."""
    prompt = judge_prompt(body)
    if "The answer invents unsupported facts." in prompt:
        score = 1 if "on the moon" in prompt else 0
    elif "The answer is factually correct." in prompt:
        score = 1 if "capital of France is Paris" in prompt else 0
    else:
        raise AssertionError(f"unexpected judge prompt: {prompt!r}")
    return json.dumps({"score": score, "reasoning": "checked against the reference"})


def half_score_judge(body: dict[str, Any]) -> str:
    return json.dumps({"score": 0.5, "reasoning": "partly right"})


def readme_judge(base_url: str) -> Judge:
    return Judge(
        model="judge-model",
        base_url=base_url,
        auth=InjectedAuth("judge"),
    )


# --------------------------------------------------------------------------------------------
# README: AnswerEnv run as a group.
# --------------------------------------------------------------------------------------------


async def test_answer_env_runs_a_group_against_the_mock_model(tmp_path: Path) -> None:
    write_answer_rows(tmp_path)
    env = AnswerEnv()
    dataset = await env.create_dataset("train", tmp_path)
    assert isinstance(dataset, Dataset) and len(dataset) == len(ANSWER_ROWS)
    example = dataset[1]
    assert example.payload["answer"] == "Paris"
    assert example.id == canonical_example_id(answer_row_to_example(ANSWER_ROWS[1]).payload)

    async with MockModelServer(answer_policy) as server:
        outcomes = await env.run_group(requests_for(example, server, ["r0", "r1", "wrong-r2"]))
        recorded = server.requests
    await env.aclose()

    assert list(outcomes) == ["r0", "r1", "wrong-r2"]
    assert {rid: dict(o.rewards) for rid, o in outcomes.items()} == {
        "r0": {"correct": 1.0},
        "r1": {"correct": 1.0},
        "wrong-r2": {"correct": 0.0},
    }
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    assert len(recorded) == 3
    assert {r.headers["authorization"] for r in recorded} == {"Bearer policy-key"}
    assert {r.body["model"] for r in recorded} == {"policy-model"}
    assert recorded[0].body["messages"] == example.payload["prompt_messages"]


async def test_rollout_requests_carry_their_split_into_the_rollout(tmp_path: Path) -> None:
    write_answer_rows(tmp_path)
    env = AnswerEnv()
    example = (await env.create_dataset("eval", tmp_path))[0]
    async with MockModelServer(answer_policy) as server:
        default, evaluation = (
            requests_for(example, server, ["train-r0"])[0],
            requests_for(example, server, ["eval-r0"], split="eval")[0],
        )
        assert default.split == "train" and evaluation.split == "eval"
        rollouts = [await env.run_rollout(default), await env.run_rollout(evaluation)]
    await env.aclose()
    assert [r.split for r in rollouts] == ["train", "eval"]
    assert [dict(r.rewards or {}) for r in rollouts] == [{"correct": 1.0}] * 2


async def test_the_local_runner_accepts_the_readme_create_dataset_signature(
    tmp_path: Path,
) -> None:
    """AnswerEnv's ``create_dataset`` takes no ``max_examples``; the runner still limits it."""
    write_answer_rows(tmp_path)
    env = AnswerEnv()
    async with MockModelServer(answer_policy) as server:
        report = await run_environment(
            env,
            RunConfig(
                model="policy-model",
                base_url=server.base_url,
                base_dir=tmp_path,
                group_size=2,
                max_examples=1,
            ),
        )
        asked = [message_text(r.body["messages"][-1]["content"]) for r in server.requests]
    await env.aclose()
    assert report.groups == 1 and dict(report.rollouts_by_reason) == {"finished": 2}
    assert report.reward_stats["correct"].mean == 1.0
    assert asked == [ANSWER_ROWS[0]["question"]] * 2


async def test_operational_failures_keep_the_reward_shape_without_cancelling_siblings(
    tmp_path: Path,
) -> None:
    write_answer_rows(tmp_path)
    env = AnswerEnv()
    example = (await env.create_dataset("train", tmp_path))[0]
    async with MockModelServer(answer_policy) as server:
        server.inject(Fault.status(500), session="r1")
        outcomes = await env.run_group(requests_for(example, server, ["r0", "r1", "r2"]))
    await env.aclose()
    assert {rid: (dict(o.rewards), o.termination_reason) for rid, o in outcomes.items()} == {
        "r0": ({"correct": 1.0}, "finished"),
        "r1": ({"correct": 0.0}, "model_error"),
        "r2": ({"correct": 1.0}, "finished"),
    }


class CrashingRewardEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        raise KeyError("a defect in user reward code")


class GroupCrashEnv(AnswerEnv):
    async def compute_group_rewards(self, rollouts):  # type: ignore[override]
        raise ZeroDivisionError("a defect in user group reward code")


class MisshapenRewardEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"correctness": 1.0}


@pytest.mark.parametrize(
    ("env_class", "reason"),
    [
        (CrashingRewardEnv, "reward_error"),
        (GroupCrashEnv, "group_reward_error"),
        (MisshapenRewardEnv, "group_reward_error"),
    ],
)
async def test_reward_hook_defects_settle_as_zero_outcomes(
    tmp_path: Path, env_class: type[AnswerEnv], reason: str
) -> None:
    write_answer_rows(tmp_path)
    env = env_class()
    example = (await env.create_dataset("train", tmp_path))[0]
    async with MockModelServer(answer_policy) as server:
        outcomes = await env.run_group(requests_for(example, server, ["r0", "r1"]))
    await env.aclose()
    assert {rid: (dict(o.rewards), o.termination_reason) for rid, o in outcomes.items()} == {
        "r0": ({"correct": 0.0}, reason),
        "r1": ({"correct": 0.0}, reason),
    }


class WrongRolloutIdEnv(AnswerEnv):
    async def run_rollout(self, request: RolloutRequest) -> BaseRollout:
        rollout = await super().run_rollout(request)
        if request.rollout_id == "r1":
            return dataclasses.replace(rollout, rollout_id="someone-else")
        return rollout


class NonZeroFailureEnv(AnswerEnv):
    async def run_rollout(self, request: RolloutRequest) -> BaseRollout:
        rollout = await super().run_rollout(request)
        if request.rollout_id == "r1":
            return dataclasses.replace(rollout, termination_reason="tool_error")
        return rollout


@pytest.mark.parametrize(
    ("env_class", "message"),
    [
        (WrongRolloutIdEnv, "wrong rollout ID"),
        (NonZeroFailureEnv, "failed rollout 'r1' has non-zero rewards"),
    ],
)
async def test_contract_violations_fail_loudly_after_the_siblings_settle(
    tmp_path: Path, env_class: type[AnswerEnv], message: str
) -> None:
    write_answer_rows(tmp_path)
    env = env_class()
    example = (await env.create_dataset("train", tmp_path))[0]
    async with MockModelServer(answer_policy) as server:
        server.inject(Fault.delay(0.2), session="r2")  # the slowest sibling still completes
        with pytest.raises(ValueError, match=message):
            await env.run_group(requests_for(example, server, ["r0", "r1", "r2"]))
        sessions = sorted(r.session for r in server.requests)
    await env.aclose()
    assert sessions == ["r0", "r1", "r2"]


class DuplicateKeysEnv(AnswerEnv):
    reward_keys = ("correct", "correct")


async def test_a_broken_reward_schema_fails_before_any_model_call(tmp_path: Path) -> None:
    write_answer_rows(tmp_path)
    env = DuplicateKeysEnv()
    example = (await env.create_dataset("train", tmp_path))[0]
    async with MockModelServer(answer_policy) as server:
        with pytest.raises(ValueError, match="reward_keys must not contain duplicates"):
            await env.run_group(requests_for(example, server, ["r0", "r1"]))
        assert server.requests == []
    await env.aclose()


# --------------------------------------------------------------------------------------------
# README: judge-backed rewards.
# --------------------------------------------------------------------------------------------


async def test_readme_judge_snippet_scores_with_the_bound_injected_auth() -> None:
    async with MockModelServer(fair_judge) as server:
        judge = readme_judge(server.base_url)
        rubrics = list(RUBRICS)
        with bind_model_auth({"judge": StaticBearerAuth("judge-secret")}):
            scored = {}
            for rollout_id, completion in (
                ("good", GOOD_COMPLETION),
                ("bad", FABRICATED_COMPLETION),
            ):
                rewards = await score_rubrics(
                    rollout_id,
                    completion,
                    ground_truth=REFERENCE,
                    rubrics=rubrics,
                    question=QUESTION,
                    judge=judge,
                )
                scored[rollout_id] = rewards
        recorded = server.requests

    assert scored == {
        "good": {"rubric_correctness": 1.0, "rubric_fabrication": 1.0},
        "bad": {"rubric_correctness": 0.0, "rubric_fabrication": 0.0},
    }
    assert len(recorded) == 4
    assert {r.body["model"] for r in recorded} == {"judge-model"}
    assert {r.headers["authorization"] for r in recorded} == {"Bearer judge-secret"}
    for request in recorded:
        prompt = judge_prompt(request.body)
        assert QUESTION in prompt and REFERENCE in prompt


async def test_injected_auth_is_resolved_immediately_before_each_judge_call() -> None:
    async with MockModelServer(fair_judge) as server:
        judge = readme_judge(server.base_url)
        for token in ("first-token", "second-token"):
            with bind_model_auth({"judge": StaticBearerAuth(token)}):
                await score_rubrics(
                    "r0",
                    GOOD_COMPLETION,
                    ground_truth=REFERENCE,
                    rubrics=RUBRICS[:1],
                    question=QUESTION,
                    judge=judge,
                )
        with pytest.raises(JudgeError) as unbound:
            await score_rubrics(
                "r0",
                GOOD_COMPLETION,
                ground_truth=REFERENCE,
                rubrics=RUBRICS[:1],
                question=QUESTION,
                judge=judge,
            )
        headers = [r.headers["authorization"] for r in server.requests]
    assert headers == ["Bearer first-token", "Bearer second-token"]
    assert unbound.value.termination_reason == "judge_error"


async def test_static_bearer_auth_is_the_alternative_for_an_own_judge_endpoint() -> None:
    api_key = "sk-own-judge-key"
    async with MockModelServer(fair_judge) as server:
        judge = Judge(model="judge-model", base_url=server.base_url, auth=StaticBearerAuth(api_key))
        rewards = await score_rubrics(
            "r0",
            GOOD_COMPLETION,
            ground_truth=REFERENCE,
            rubrics=RUBRICS,
            question=QUESTION,
            judge=judge,
        )
        headers = {r.headers["authorization"] for r in server.requests}
    assert rewards == {"rubric_correctness": 1.0, "rubric_fabrication": 1.0}
    assert headers == {f"Bearer {api_key}"}
    assert api_key not in repr(judge)


def test_bundles_carry_the_injected_reference_but_pickle_a_static_key() -> None:
    injected = dump_bundle(
        JudgedAnswerEnv, constructor_args={"judge": readme_judge("https://models.example/v1")}
    )
    loaded = load_bundle(injected)
    assert loaded.judge.auth == InjectedAuth("judge")  # type: ignore[attr-defined]
    assert loaded.reward_keys == ("rubric_correctness", "rubric_fabrication")

    api_key = "sk-static-judge-key-123"
    static = dump_bundle(
        JudgedAnswerEnv,
        constructor_args={
            "judge": Judge(
                model="judge-model",
                base_url="https://models.example/v1",
                auth=StaticBearerAuth(api_key),
            )
        },
    )
    assert api_key.encode() in static.pickled
    assert api_key not in repr(static)
    assert api_key.encode() not in static.metadata.to_json_bytes()


async def test_a_binary_rubric_rejects_an_intermediate_judge_score() -> None:
    async with MockModelServer(half_score_judge) as server:
        judge = readme_judge(server.base_url)
        with bind_model_auth({"judge": StaticBearerAuth("judge-secret")}):
            with pytest.raises(JudgeError) as rejected:
                await score_rubrics(
                    "r0",
                    GOOD_COMPLETION,
                    ground_truth=REFERENCE,
                    rubrics=RUBRICS[:1],
                    question=QUESTION,
                    judge=judge,
                )
            graded = Rubric(
                "Correctness",
                "The answer is factually correct.",
                score_map={0: "wrong", 0.5: "partly right", 1: "right"},
            )
            rewards = await score_rubrics(
                "r1",
                GOOD_COMPLETION,
                ground_truth=REFERENCE,
                rubrics=[graded],
                question=QUESTION,
                judge=judge,
            )
    assert rejected.value.termination_reason == "judge_error"
    assert rewards == {"rubric_correctness": 0.5}


async def test_invalid_judge_output_raises_judge_error() -> None:
    async with MockModelServer(lambda body: "I would give it a solid yes.") as server:
        judge = Judge(model="judge-model", base_url=server.base_url, auth=StaticBearerAuth("k"))
        with pytest.raises(JudgeError):
            await score_rubrics(
                "r0",
                GOOD_COMPLETION,
                ground_truth=REFERENCE,
                rubrics=RUBRICS,
                question=QUESTION,
                judge=judge,
            )


@pytest.mark.parametrize(
    "completion",
    ["", "   ", [], [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": ""}]],
    ids=["empty", "blank", "no-messages", "empty-assistant"],
)
async def test_empty_completions_score_zeros_without_calling_the_judge(completion: Any) -> None:
    async with MockModelServer(fair_judge) as server:
        rewards = await score_rubrics(
            "r0",
            completion,
            ground_truth=REFERENCE,
            rubrics=RUBRICS,
            question=QUESTION,
            judge=readme_judge(server.base_url),
        )
        assert server.requests == []
    assert rewards == {"rubric_correctness": 0.0, "rubric_fabrication": 0.0}


async def test_an_out_of_set_judge_score_settles_as_judge_error_in_the_environment(
    tmp_path: Path,
) -> None:
    write_answer_rows(tmp_path)

    def model_and_judge(body: dict[str, Any], request: RecordedRequest) -> str:
        if request.session == "judge":
            return judge_by_turn(body)
        return "The capital of France is Paris."

    judge_by_turn = fair_judge
    async with MockModelServer(model_and_judge) as server:
        env = JudgedAnswerEnv(readme_judge(server.session_url("judge")))
        example = (await env.create_dataset("train", tmp_path))[1]
        with bind_model_auth({"judge": StaticBearerAuth("judge-secret")}):
            trusted = await env.run_group(requests_for(example, server, ["a0", "a1"]))
            trusted_calls = len(server.requests_for("judge"))
            judge_by_turn = half_score_judge
            rejected = await env.run_group(requests_for(example, server, ["b0", "b1"]))
        judge_calls = len(server.requests_for("judge"))
    await env.aclose()

    assert {rid: (dict(o.rewards), o.termination_reason) for rid, o in trusted.items()} == {
        rid: ({"rubric_correctness": 1.0, "rubric_fabrication": 1.0}, "finished")
        for rid in ("a0", "a1")
    }
    assert {rid: (dict(o.rewards), o.termination_reason) for rid, o in rejected.items()} == {
        rid: ({"rubric_correctness": 0.0, "rubric_fabrication": 0.0}, "judge_error")
        for rid in ("b0", "b1")
    }
    assert trusted_calls == 2 * len(RUBRICS)
    # A rejected evaluation cancels its sibling rubric, which may not have been sent yet.
    assert trusted_calls + 2 <= judge_calls <= trusted_calls + 2 * len(RUBRICS)


# --------------------------------------------------------------------------------------------
# README: bundling, digest and compatibility.
# --------------------------------------------------------------------------------------------


def test_readme_bundle_snippet_records_canonical_metadata_and_a_digest() -> None:
    bundle = dump_bundle(
        AnswerEnv,
        constructor_args={},
        pip_dependencies=["httpx>=0.28,<0.29"],
    )
    digest = bundle_digest(bundle)

    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert bundle_digest(bundle) == digest
    metadata = bundle.metadata
    assert metadata.pip_dependencies == ("httpx<0.29,>=0.28",)
    assert metadata.python_version == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert metadata.benchmax_version == importlib.metadata.version("benchmax")
    assert metadata.env_class_source is not None
    assert metadata.env_class_source.startswith("class AnswerEnv(BaseEnv):")

    # The digest covers the canonical metadata as well as the exact pickle.
    other_metadata = Bundle(
        pickled=bundle.pickled, metadata=dataclasses.replace(metadata, pip_dependencies=())
    )
    assert bundle_digest(other_metadata) != digest
    other_pickle = Bundle(pickled=bundle.pickled + b"\x00", metadata=metadata)
    assert bundle_digest(other_pickle) != digest

    env = load_bundle(bundle)
    assert type(env).__name__ == "AnswerEnv" and env.reward_keys == ("correct",)


def test_dependency_declarations_are_canonical_order_independent_and_unique() -> None:
    forward = dump_bundle(AnswerEnv, pip_dependencies=["httpx>=0.28,<0.29", "Click[Extra]>=8"])
    backward = dump_bundle(AnswerEnv, pip_dependencies=["click[extra] >= 8", "HTTPX<0.29,>=0.28"])
    assert forward.metadata == backward.metadata
    assert forward.metadata.to_json_bytes() == backward.metadata.to_json_bytes()
    assert forward.metadata.pip_dependencies == ("click[extra]>=8", "httpx<0.29,>=0.28")

    with pytest.raises(BundlingError):
        dump_bundle(AnswerEnv, pip_dependencies=["httpx>=0.28", "httpx<0.29"])
    with pytest.raises(BundlingError):
        dump_bundle(AnswerEnv, pip_dependencies=["httpx >= = 0.28"])


def test_runtimes_check_python_exactly_and_benchmax_by_major_minor() -> None:
    metadata = dump_bundle(AnswerEnv, pip_dependencies=["httpx>=0.28,<0.29"]).metadata
    validate_bundle_compatibility(metadata)

    major, minor, *_ = importlib.metadata.version("benchmax").split(".")
    for patch in ("0", "1", "99"):
        validate_bundle_compatibility(
            dataclasses.replace(metadata, benchmax_version=f"{major}.{minor}.{patch}")
        )
    validate_bundle_compatibility(dataclasses.replace(metadata, benchmax_version="0.2.0"))

    for python in ("3.11", "3.13", "3.14"):
        with pytest.raises(IncompatiblePythonError):
            validate_bundle_compatibility(dataclasses.replace(metadata, python_version=python))
    other_series = [f"{major}.{int(minor) + 1}.0", f"{int(major) + 1}.{minor}.0", "0.1.9"]
    for version in other_series:
        with pytest.raises(IncompatibleBenchmaxError):
            validate_bundle_compatibility(dataclasses.replace(metadata, benchmax_version=version))
    assert issubclass(IncompatiblePythonError, IncompatibleRuntimeError)
    assert issubclass(IncompatibleBenchmaxError, IncompatibleRuntimeError)


def test_python_3_12_is_required() -> None:
    assert sys.version_info[:2] == (3, 12)
    requires = importlib.metadata.metadata("benchmax")["Requires-Python"]
    assert requires.replace(" ", "") == "==3.12.*"


@pytest.mark.parametrize(
    "module", ["benchmax.rubrics", "benchmax.envs.reward_helpers", "benchmax.prompts"]
)
def test_removed_modules_do_not_exist(module: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_frozen_dataset_is_gone() -> None:
    for module in (benchmax.envs, benchmax.envs.dataset):
        assert not hasattr(module, "FrozenDataset")
    with pytest.raises(ImportError):
        exec("from benchmax.envs import FrozenDataset", {})


# --------------------------------------------------------------------------------------------
# castform overview: dataset, local run and bundle.
# --------------------------------------------------------------------------------------------


async def test_overview_dataset_rows_become_stable_examples(tmp_path: Path) -> None:
    train_data, eval_data = write_split_dataset(tmp_path, n=10)
    assert (len(train_data), len(eval_data)) == (8, 2)

    env = MyEnv()
    train = await env.create_dataset("train", tmp_path)
    first_three = await env.create_dataset("train", tmp_path, max_examples=3)
    again = await env.create_dataset("train", tmp_path)

    assert [e.payload["ground_truth"] for e in train] == [r["ground_truth"] for r in train_data]
    assert [e.id for e in first_three] == [e.id for e in train][:3]
    assert [e.id for e in again] == [e.id for e in train]
    example = train[0]
    assert example.payload["prompt_messages"][1] == {"role": "user", "content": "what is 2+2?"}
    assert example.id == canonical_example_id(example.payload)
    assert len({e.id for e in train}) == len(train)


async def test_overview_env_runs_through_the_local_runner(tmp_path: Path) -> None:
    train_data, _ = write_split_dataset(tmp_path, n=10)
    output = tmp_path / "results" / "train.jsonl"
    output.parent.mkdir()
    async with MockModelServer(tagged_answers) as server:
        env = MyEnv()
        report = await run_environment(
            env,
            RunConfig(
                model="policy-model",
                base_url=f"{server.origin}/sessions/{{rollout_id}}/v1",
                split="train",
                base_dir=tmp_path,
                group_size=2,
                output=output,
            ),
        )
        limited = await run_environment(
            env,
            RunConfig(
                model="policy-model",
                base_url=server.base_url,
                split="eval",
                base_dir=tmp_path,
                group_size=3,
                max_examples=1,
            ),
        )
        model_calls = len(server.requests)
    await env.aclose()

    assert report.groups == len(train_data) and report.rollouts == 2 * len(train_data)
    assert dict(report.rollouts_by_reason) == {"finished": 2 * len(train_data)}
    stats = report.reward_stats["correct"]
    assert (stats.mean, stats.min, stats.max) == (0.5, 0.0, 1.0)
    assert report.no_variance_group_share == 0.0

    results = read_results(output)
    by_rollout = {(r.example_index, r.group_index): r for r in results.rollouts}
    assert {key[1]: r.rewards for key, r in by_rollout.items()} == {
        0: {"correct": 1.0},
        1: {"correct": 0.0},
    }
    transcript = by_rollout[(1, 0)].messages
    assert transcript[-1] == {"role": "assistant", "content": "Sure. <answer> PARIS </answer>"}

    assert limited.groups == 1 and dict(limited.rollouts_by_reason) == {"finished": 3}
    assert limited.reward_stats["correct"].mean == 1.0
    assert model_calls == 2 * len(train_data) + 3


def test_overview_env_as_printed_needs_reward_keys() -> None:
    printed_body = {
        name: value
        for name, value in vars(MyEnv).items()
        if name in {"max_turns", "create_dataset", "_example", "compute_reward"}
    }
    as_printed = type("MyEnv", (BaseEnv,), printed_body)
    with pytest.raises(TypeError, match="reward_keys"):
        as_printed()
    with pytest.raises(BundlingError, match="reward_keys"):
        dump_bundle(as_printed)


FRESH_RUN = """
import asyncio, importlib.util, json, re, sys
from pathlib import Path
from benchmax.auth import StaticBearerAuth
from benchmax.bundle import (
    Bundle, BundleMetadata, bundle_digest, load_bundle, validate_bundle_compatibility,
)
from benchmax.envs import RolloutRequest
from benchmax.testing import MockModelServer

pickled_path, metadata_path, data_dir = sys.argv[1:4]
bundle = Bundle(
    pickled=Path(pickled_path).read_bytes(),
    metadata=BundleMetadata.from_json_bytes(Path(metadata_path).read_bytes()),
)
validate_bundle_compatibility(bundle.metadata)
env = load_bundle(bundle)

def answer(body):
    question = body["messages"][-1]["content"]
    found = re.fullmatch(r"what is (\\d+)\\+(\\d+)\\?", question)
    return f"<answer>{int(found[1]) + int(found[2])}</answer>"

async def main():
    dataset = await env.create_dataset("eval", Path(data_dir), max_examples=5)
    async with MockModelServer(answer) as server:
        requests = [
            RolloutRequest(
                rollout_id=f"r{i}", example=dataset[0], model="m",
                base_url=server.session_url(f"r{i}"), model_auth=StaticBearerAuth("k"),
                split="eval",
            )
            for i in range(2)
        ]
        outcomes = await env.run_group(requests)
    await env.aclose()
    return len(dataset), outcomes

count, outcomes = asyncio.run(main())
print(json.dumps({
    "digest": bundle_digest(bundle),
    "class": type(env).__name__,
    "reward_keys": list(env.reward_keys),
    "tests_importable": importlib.util.find_spec("tests") is not None,
    "examples": count,
    "outcomes": {k: [dict(v.rewards), v.termination_reason] for k, v in outcomes.items()},
}))
"""


def test_overview_bundle_loads_and_runs_in_a_fresh_interpreter(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_split_dataset(data_dir, n=10)
    bundle = dump_bundle(MyEnv)
    assert bundle.metadata.pip_dependencies == ()
    (tmp_path / "env.pkl").write_bytes(bundle.pickled)
    (tmp_path / "metadata.json").write_bytes(bundle.metadata.to_json_bytes())
    empty = tmp_path / "cwd"
    empty.mkdir()

    completed = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            textwrap.dedent(FRESH_RUN),
            str(tmp_path / "env.pkl"),
            str(tmp_path / "metadata.json"),
            str(data_dir),
        ],
        cwd=empty,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result == {
        "digest": bundle_digest(bundle),
        "class": "MyEnv",
        "reward_keys": ["correct"],
        "tests_importable": False,
        "examples": 2,
        "outcomes": {"r0": [{"correct": 1.0}, "finished"], "r1": [{"correct": 1.0}, "finished"]},
    }
