"""TRL trains every branch of a rollout: ``BranchingGRPOTrainer`` with
``RolloutFunc(every_branch=True)``, a tiny Qwen2 on CPU, rollouts against the mock server
whose replies carry reasoning that BaseEnv does not send back (so each rollout's second
call begins a second branch). Checks what TRL's loss was computed on: one row per branch,
each sampled token once with mask 1, each branch with its rollout's advantage (the group
statistics over one reward per rollout), and that the weights moved. Also pins
``with_branch_rows`` (the advantage expansion and the masked filler rows).
Run with ``uv run --group trl pytest -m train tests/train_command/test_branch_rows.py``.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
from datasets import Dataset
from examples.calculator.env import CalculatorEnv
from tests.trl_training.tiny_policy import build_model, build_tokenizer
from trl import GRPOConfig

from benchmax.integrations.trl import RolloutFunc, benchmax_reward, dataset_rows, load_examples
from benchmax.testing import MockModelServer, RecordedRequest
from benchmax.training import BranchingGRPOTrainer, rollout_sequences
from benchmax.training._branching_trainer import with_branch_rows
from benchmax.trajectory import Trajectory

pytestmark = pytest.mark.train

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
GENERATIONS = 4


def _think_then_answer(body: dict[str, Any], request: RecordedRequest) -> Any:
    """Reasons and calls ``add``; then answers (850 is right), rightly in rollouts ...-1
    and ...-3."""
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {
            "reasoning_content": f"add ({request.session})",  # each first branch its own
            "tool_calls": [{"name": "add", "arguments": {"a": int(request.session[-1]), "b": 2}}],
        }
    return "<answer>850</answer>" if request.session[-1] in "13" else "<answer>0</answer>"


class RecordingTrainer(BranchingGRPOTrainer):
    """Keeps the inputs of every loss computation (what TRL trained on)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loss_inputs: list[dict[str, torch.Tensor]] = []

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        self.loss_inputs.append(
            {k: v.detach().clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        )
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


@pytest.fixture
def mock_server() -> Iterator[MockModelServer]:
    """The mock server on a loop of its own thread (TRL's rollout_func call is blocking)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = MockModelServer(_think_then_answer, tokens=True)
    asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result()
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def _unpadded(ids: torch.Tensor, mask: torch.Tensor) -> list[int]:
    return [int(t) for t, keep in zip(ids.tolist(), mask.tolist(), strict=True) if keep]


def test_every_branch_trains_with_its_rollouts_advantage(
    mock_server: MockModelServer, tmp_path: Path
) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    env = CalculatorEnv()
    examples = load_examples(env, "eval", CALCULATOR, max_examples=1)
    trajectories: list[Trajectory] = []
    config = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=GENERATIONS,
        num_generations=GENERATIONS,
        max_steps=1,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    url = mock_server.session_url("ROLLOUT").replace("ROLLOUT", "{rollout_id}")
    with RolloutFunc(
        env, examples, base_url=url, model="m", on_group=trajectories.extend, every_branch=True
    ) as rollout:
        trainer = RecordingTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=Dataset.from_list(dataset_rows(examples)),
            reward_funcs=[benchmax_reward],
            rollout_func=rollout,
        )
        trainer.train()

    assert len(trajectories) == GENERATIONS
    assert all(len(t.branches) == 2 for t in trajectories)
    (inputs,) = trainer.loss_inputs
    rows = inputs["prompt_ids"].shape[0]
    assert rows == 2 * GENERATIONS  # one row per branch, none dropped
    # Each branch, as rollout_sequences builds it, to its rollout.
    owner = {}
    for trajectory in trajectories:
        for sequence in rollout_sequences(trajectory):
            key = (sequence.prompt_ids, sequence.completion_ids, sequence.completion_mask)
            owner[key] = trajectory
    rewards = {t.rollout_id: sum(t.rewards.values()) for t in trajectories}
    values = list(rewards.values())
    mean = sum(values) / len(values)
    std = math.sqrt(sum((r - mean) ** 2 for r in values) / (len(values) - 1))
    assert std > 0
    trained: dict[str, Counter[int]] = {t.rollout_id: Counter() for t in trajectories}
    seen = set()
    for row in range(rows):
        prompt = tuple(_unpadded(inputs["prompt_ids"][row], inputs["prompt_mask"][row]))
        ids = _unpadded(inputs["completion_ids"][row], inputs["completion_mask"][row])
        mask = tuple(int(m) for m in inputs["tool_mask"][row][: len(ids)].tolist())
        key = (prompt, tuple(ids), mask)
        trajectory = owner[key]
        seen.add(key)
        trained[trajectory.rollout_id].update(t for t, m in zip(ids, mask, strict=True) if m)
        # TRL's advantage of the rollout: its scalar against the group, one reward each.
        expected = (rewards[trajectory.rollout_id] - mean) / (std + 1e-4)
        assert inputs["advantages"][row].item() == pytest.approx(expected, abs=1e-4)
    assert seen == set(owner)
    for trajectory in trajectories:
        sampled = Counter(t for c in trajectory.model_calls for t in c.completion_token_ids or ())
        assert trained[trajectory.rollout_id] == sampled
    # The loss normaliser counted every branch's sampled tokens.
    total = sum(sum(c.values()) for c in trained.values())
    assert int(inputs["num_items_in_batch"].item()) == total
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert changed, "no weight changed after the optimizer step"


def _batch(rows: int, rollouts: int) -> dict[str, Any]:
    return {
        "prompt_ids": torch.arange(rows * 2).view(rows, 2),
        "prompt_mask": torch.ones(rows, 2, dtype=torch.long),
        "completion_ids": torch.arange(rows * 3).view(rows, 3),
        "completion_mask": torch.ones(rows, 3, dtype=torch.long),
        "tool_mask": torch.ones(rows, 3, dtype=torch.long),
        "sampling_per_token_logps": torch.full((rows, 3), -0.5),
        "advantages": torch.arange(rollouts, dtype=torch.float32) + 1.0,
        "num_items_in_batch": torch.tensor(rows * 3),
    }


def test_with_branch_rows_gives_extra_rows_their_rollouts_advantage() -> None:
    out = with_branch_rows(_batch(5, 3), [2, 1, 2])
    assert out["advantages"].tolist() == [1.0, 2.0, 3.0, 1.0, 3.0]
    # one row per rollout: nothing changes
    same = with_branch_rows(_batch(3, 3), [1, 1, 1])
    assert same["advantages"].tolist() == [1.0, 2.0, 3.0]


def test_with_branch_rows_fills_up_to_the_micro_batch_multiple_with_masked_rows() -> None:
    out = with_branch_rows(_batch(5, 3), [2, 1, 2], multiple=4)
    assert out["prompt_ids"].shape[0] == out["advantages"].shape[0] == 8
    assert out["completion_mask"][5:].sum() == 0 and out["tool_mask"][5:].sum() == 0
    assert out["advantages"][5:].tolist() == [0.0, 0.0, 0.0]
    assert out["num_items_in_batch"].item() == 15  # the filler adds no trained token


def test_with_branch_rows_refuses_counts_that_do_not_match_the_rows() -> None:
    with pytest.raises(ValueError, match="returned 5 rows for 3 rollouts"):
        with_branch_rows(_batch(5, 3), [1, 1, 1])
    with pytest.raises(ValueError, match="counts >= 1"):
        with_branch_rows(_batch(3, 3), [0, 2, 1])
