"""TRL's GRPOTrainer learns on the calculator example on CPU, with the exact tokens sampled.

The policy is a tiny random Qwen2 and a tokenizer trained here (``tiny_policy``); the model
server samples from the trainer's own model object, so every rollout comes from the current
weights. One rollout of the first group fails with HTTP 500 (``model_error``).
Run with ``uv run --group trl pytest -m trl``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
from datasets import Dataset
from examples.calculator.env import CalculatorEnv
from tests.trl.tiny_policy import PolicyServer, build_model, build_tokenizer

from benchmax.integrations.trl import (
    RolloutFunc,
    benchmax_reward,
    dataset_rows,
    load_examples,
)
from benchmax.trajectory import Trajectory
from trl import GRPOConfig, GRPOTrainer

pytestmark = pytest.mark.trl

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
GENERATIONS = 4
STEPS = 2
FAILING_REQUEST = 2  # the second chat request of the run answers HTTP 500


class RecordingTrainer(GRPOTrainer):
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


def _unpadded(ids: torch.Tensor, mask: torch.Tensor) -> list[int]:
    return [int(token) for token, keep in zip(ids.tolist(), mask.tolist(), strict=True) if keep]


def test_grpo_trains_on_calculator_with_exact_tokens(tmp_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    started = time.perf_counter()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    env = CalculatorEnv()
    examples = load_examples(env, "eval", CALCULATOR, max_examples=2)
    dataset = Dataset.from_list(dataset_rows(examples))
    trajectories: list[Trajectory] = []
    seen_rewards: list[list[float | None]] = []

    def reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        values = benchmax_reward(prompts, completions, **kwargs)
        seen_rewards.append(values)
        return values

    reward.__name__ = "benchmax_reward"
    config = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=GENERATIONS,
        num_generations=GENERATIONS,
        max_steps=STEPS,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    with (
        PolicyServer(model, tokenizer, fail_requests=(FAILING_REQUEST,)) as server,
        RolloutFunc(
            env,
            examples,
            base_url=server.base_url,
            model="tiny-qwen2",
            on_group=trajectories.extend,
        ) as rollout,
    ):
        trainer = RecordingTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=dataset,
            reward_funcs=[reward],
            rollout_func=rollout,
        )
        trainer.train()
    seconds = time.perf_counter() - started
    print(f"\nGRPO on CPU: {STEPS} steps x {GENERATIONS} rollouts in {seconds:.1f} s")

    assert trainer.state.global_step == STEPS
    assert len(trainer.loss_inputs) == STEPS
    assert len(trajectories) == STEPS * GENERATIONS

    # Every sampled completion the server returned, in order, by its token ids.
    sampled = [tuple(s.completion_ids) for s in server.sampled]
    by_rollout: dict[str, Trajectory] = {t.rollout_id: t for t in trajectories}
    failed = [t for t in trajectories if t.termination_reason == "model_error"]
    assert len(failed) == 1 and not failed[0].trainable

    for step, inputs in enumerate(trainer.loss_inputs):
        group = trajectories[step * GENERATIONS : (step + 1) * GENERATIONS]
        rewards = seen_rewards[step]
        for row, trajectory in enumerate(group):
            assert by_rollout[trajectory.rollout_id] is trajectory
            ids = _unpadded(inputs["completion_ids"][row], inputs["completion_mask"][row])
            env_mask = inputs["tool_mask"][row][: len(ids)].tolist()
            calls = [c for c in trajectory.model_calls if c.completion_token_ids]
            if not trajectory.trainable:
                # model_error: nothing of it reaches the loss, and its advantage is zero.
                assert not any(env_mask)
                assert inputs["advantages"][row].item() == 0.0
                assert rewards[row] is None
                continue
            # The ids TRL trained on: the server's samples, stitched with the tokens the
            # environment added in between (masked out).
            sampled_here = [tok for c in calls for tok in c.completion_token_ids or ()]
            assert [t for t, m in zip(ids, env_mask, strict=True) if m] == sampled_here
            for call in calls:
                assert tuple(call.completion_token_ids or ()) in sampled
            first = calls[0]
            assert _unpadded(inputs["prompt_ids"][row], inputs["prompt_mask"][row]) == list(
                first.prompt_token_ids or ()
            )
            env_added = len(ids) - sum(env_mask)
            tool_turns = sum(1 for m in trajectory.messages or () if m["role"] == "tool")
            assert (env_added > 0) == (tool_turns > 0)
            assert trajectory.token_prefix_breaks == 0
            # The reward TRL saw is benchmax's declared scalar (correct + used_tools).
            assert rewards[row] == sum(trajectory.rewards.values())
        # TRL's advantages: group-normalised benchmax rewards, the failed rollout left out.
        scored = [r for r in rewards if r is not None]
        mean = sum(scored) / len(scored)
        std = math.sqrt(sum((r - mean) ** 2 for r in scored) / (len(scored) - 1))
        for row, value in enumerate(rewards):
            if value is not None:
                expected = (value - mean) / (std + 1e-4)
                assert inputs["advantages"][row].item() == pytest.approx(expected, abs=1e-4)

    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert changed, "no weight changed after two optimizer steps"
