"""RolloutFunc with rollouts of several branches (the model's reasoning is not sent back,
so the second call's prompt does not continue the first): every branch as a row, the
coverage fields, the warning when branches are left out, and a planted loss that the
coverage check catches. Mock server in token mode; no TRL, no torch."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from examples.calculator.env import CalculatorEnv

from benchmax.integrations.trl import RolloutFunc, dataset_rows, load_examples
from benchmax.testing import MockModelServer, RecordedRequest
from benchmax.training import RolloutSequence, rollout_sequences
from benchmax.training._coverage_check import StepCoverage
from benchmax.trajectory import Trajectory

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
TRAINER = SimpleNamespace(
    args=SimpleNamespace(temperature=1.0, top_p=1.0),
    processing_class=SimpleNamespace(eos_token_id=2, pad_token_id=0),
    num_generations=3,
)


def _think_then_answer(body: dict[str, Any], request: RecordedRequest) -> Any:
    """Reasons, calls ``add``, then answers (rollout ...-0 wrongly). BaseEnv does not send
    the reasoning back, so the second prompt re-renders the first reply without it."""
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {
            "reasoning_content": "add them",
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
        }
    return "<answer>4</answer>" if request.session.endswith("-0") else "<answer>3</answer>"


async def _call(
    **options: Any,
) -> tuple[dict[str, list[Any]], dict[str, Trajectory]]:
    examples = load_examples(CalculatorEnv(), "eval", CALCULATOR, max_examples=1)
    prompts = [dataset_rows(examples)[0]["prompt"]] * 3
    trajectories: list[Trajectory] = []
    async with MockModelServer(_think_then_answer, tokens=True) as server:
        url = server.session_url("ROLLOUT").replace("ROLLOUT", "{rollout_id}")
        with RolloutFunc(
            CalculatorEnv(),
            examples,
            base_url=url,
            model="m",
            on_group=trajectories.extend,
            **options,
        ) as rollout:
            output = await asyncio.to_thread(rollout, prompts, TRAINER)
    return output, {t.rollout_id: t for t in trajectories}


def _sampled(ids: list[int], mask: list[int]) -> list[int]:
    return [t for t, m in zip(ids, mask, strict=True) if m]


async def test_every_branch_is_a_row_and_every_sampled_token_trains_once() -> None:
    output, by_id = await _call(every_branch=True)
    rollouts = output["rollout_id"]
    assert len(rollouts) == 3 and all(by_id[r].token_prefix_breaks == 1 for r in rollouts)
    assert output["benchmax_branch_rows"] == [2, 2, 2]
    # the rollouts' rows (each its last branch), then the extra rows in rollout order
    assert len(output["prompt_ids"]) == len(output["env_mask"]) == 6
    owners = [*rollouts, *rollouts]
    trained: dict[str, Counter[int]] = {r: Counter() for r in rollouts}
    for row, owner in enumerate(owners):
        trained[owner].update(_sampled(output["completion_ids"][row], output["env_mask"][row]))
    for rollout_id, tokens in trained.items():
        calls = by_id[rollout_id].model_calls
        assert tokens == Counter(t for c in calls for t in c.completion_token_ids or ())
    for counts, rollout_id in zip(output["benchmax_coverage"], rollouts, strict=True):
        coverage = by_id[rollout_id].coverage
        assert coverage is not None and coverage.share == 1.0
        assert counts == {"sampled_tokens": coverage.sampled_tokens} | {
            "trained_tokens": coverage.sampled_tokens
        }
        assert [b.began for b in coverage.branches] == ["first", "history_rewritten"]
    # the reward column stays one per rollout (TRL's group statistics see each once)
    assert output["benchmax_reward"] == [sum(by_id[r].rewards.values()) for r in rollouts]
    assert StepCoverage.of(output).share == 1.0
    assert StepCoverage.of(output).shortfall(1.0, [by_id.values()]) is None  # type: ignore[list-item]


async def test_without_every_branch_the_left_out_tokens_are_counted_and_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="benchmax.training._trl_rollouts"):
        output, by_id = await _call()
    assert len(output["prompt_ids"]) == 3 and output["benchmax_branch_rows"] == [1, 1, 1]
    coverage = StepCoverage.of(output)
    first_branches = sum(by_id[r].branches[0].sampled_tokens for r in output["rollout_id"])
    assert coverage.sampled_tokens - coverage.trained_tokens == first_branches > 0
    (warning,) = [r.getMessage() for r in caplog.records if "branches" in r.getMessage()]
    assert "3 rollout(s) had several branches" in warning
    assert f"({first_branches} sampled tokens left out)" in warning


def _drops_the_first_branch(trajectory: Trajectory) -> tuple[RolloutSequence, ...]:
    """A planted loss: a sample builder that loses a branch."""
    return rollout_sequences(trajectory)[1:]


async def test_a_planted_loss_fails_the_coverage_check() -> None:
    output, by_id = await _call(every_branch=True, sequences=_drops_the_first_branch)
    coverage = StepCoverage.of(output)
    assert coverage.share is not None and coverage.share < 0.95
    problem = coverage.shortfall(0.95, [list(by_id.values())])
    assert problem is not None
    assert problem.startswith(f"token coverage {coverage.share:.1%} is below --min-token-coverage")
    worst = coverage.worst
    assert worst is not None and worst[0] in by_id
    assert f"worst rollout {worst[0]}: {worst[2]} of {worst[1]} trained" in problem
    assert "hold fewer tokens than its 2 branch(es) (began: first, history_rewritten)" in problem
    assert "\n" not in problem
    # a threshold of 0 never stops a run
    assert coverage.shortfall(0.0, [list(by_id.values())]) is None
