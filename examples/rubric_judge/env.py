"""A one-turn task scored by an LLM judge against rubrics.

Rows look like ``{"question": ..., "reference": ...}``. ``compute_reward`` asks the judge
to grade the reply on three binary rubrics (``score_rubrics``); the reward keys are the
rubric keys ``rubric_correctness``, ``rubric_concision`` and ``rubric_fabrication`` (a
negative rubric: 1.0 means no fabrication). The judge authenticates with
``InjectedAuth("judge")``, a named reference the runtime binds (``--auth judge=VAR``),
so no key is stored in the environment or its bundle.

    uv run benchmax run examples/rubric_judge/env.py:RubricJudgeEnv \
        --data examples/rubric_judge --mock-policy examples/rubric_judge/policy.py:respond \
        --env-arg judge_base_url=@mock --auth judge=JUDGE_API_KEY
"""

from __future__ import annotations

from pathlib import Path

from benchmax.auth import InjectedAuth
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    canonical_example_id,
)
from benchmax.rewards import Judge, Rubric, rubric_reward_key, score_rubrics

RUBRICS = (
    Rubric("Correctness", "The response gives the same answer as the reference answer."),
    Rubric("Concision", "The response answers in one short sentence, without filler."),
    Rubric(
        "Fabrication",
        "The response adds claims that neither the question nor the reference supports.",
        polarity="negative",
    ),
)


class RubricJudgeEnv(BaseEnv):
    """Short factual answers graded by a judge model on correctness, concision, fabrication."""

    reward_keys = tuple(rubric_reward_key(rubric) for rubric in RUBRICS)
    max_turns = 1

    def __init__(self, *, judge_base_url: str, judge_model: str = "mock-judge") -> None:
        super().__init__()
        self.judge = Judge(model=judge_model, base_url=judge_base_url, auth=InjectedAuth("judge"))

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        payload = {
            "prompt_messages": [{"role": "user", "content": row["question"]}],
            "question": row["question"],
            "reference": row["reference"],
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return await score_rubrics(
            rollout.rollout_id,
            rollout.messages,
            ground_truth=rollout.example_args["reference"],
            rubrics=RUBRICS,
            question=rollout.example_args["question"],
            judge=self.judge,
        )
