"""TRL's GRPOTrainer learns on the calculator example on CPU, with the exact tokens sampled.

The policy is a tiny random Qwen2 and a tokenizer trained here (``tiny_policy``); benchmax's
embedded sampler (``PolicySampler``, under the calculator grammar) samples from the trainer's
own model object, so every rollout comes from the current weights. One rollout of the first
group fails with HTTP 500 (``model_error``). The dataset holds two examples with the same
prompt (and different answers): each prompt finds its example by id.
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
from tests.trl_training.tiny_policy import (
    RolloutIdAuth,
    build_model,
    build_tokenizer,
    calculator_grammar,
    failing,
)
from trl import GRPOConfig, GRPOTrainer

from benchmax.envs import Example
from benchmax.integrations.trl import (
    RolloutFunc,
    benchmax_reward,
    dataset_rows,
    load_examples,
)
from benchmax.training import PolicySampler
from benchmax.training._decoding import Sampled
from benchmax.trajectory import Trajectory

pytestmark = pytest.mark.trl

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
GENERATIONS = 4
STEPS = 2
FAILING_ROLLOUT = "trl-0-0-1"  # the second rollout of the first group: HTTP 500
SEED = 7


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


def _stitched(trajectory: Trajectory) -> tuple[list[int], list[int], list[int]]:
    """The rollout as one sequence, built here from its calls: (prompt ids, completion ids
    with the environment's tokens between calls, mask: 1 sampled, 0 added)."""
    calls = [c for c in trajectory.model_calls if c.completion_token_ids is not None]
    if not calls:
        return [], [], []
    ids: list[int] = []
    mask: list[int] = []
    previous = None
    for call in calls:
        prompt = list(call.prompt_token_ids or ())
        if previous is not None:
            assert prompt[: len(previous)] == previous  # the template is prefix-stable
            added = prompt[len(previous) :]
            ids += added
            mask += [0] * len(added)
        sampled = list(call.completion_token_ids or ())
        ids += sampled
        mask += [1] * len(sampled)
        previous = prompt + sampled
    return list(calls[0].prompt_token_ids or ()), ids, mask


def test_grpo_trains_on_calculator_with_exact_tokens(tmp_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    started = time.perf_counter()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    env = CalculatorEnv()
    (first,) = load_examples(env, "eval", CALCULATOR, max_examples=1)
    twin = Example(id="twin", payload={**first.payload, "answer": first.payload["answer"] + 1})
    examples = [first, twin]  # the same prompt, different answers
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
        bf16=False,  # GRPOConfig defaults to bf16 autocast, slow on CPU
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    sampled_ids: list[Sampled] = []
    with (
        PolicySampler(
            model,
            tokenizer,
            model_name="tiny-qwen2",
            allowed_tokens=calculator_grammar(tokenizer),
            request_filter=failing([FAILING_ROLLOUT]),
            on_completion=sampled_ids.append,
            max_batch_size=GENERATIONS,
        ) as server,
        RolloutFunc(
            env,
            examples,
            base_url=server.base_url,
            model=server.model_name,
            model_auth=RolloutIdAuth(),
            seed=SEED,
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

    # Every completion the server sampled, by its token ids.
    sampled = {tuple(s.completion_ids) for s in sampled_ids}
    # The rows of a group were sampled together (batches of the group's live rollouts).
    assert server.stats.mean_batch > 1
    # Each step's group is one example's (its rewards follow that example's answer).
    for step in range(STEPS):
        group = trajectories[step * GENERATIONS : (step + 1) * GENERATIONS]
        assert len({t.example_id for t in group}) == 1
    # One epoch of the two-row dataset: both twins were trained on, each by its own id.
    assert {t.example_id for t in trajectories} == {first.id, "twin"}
    failed = [t for t in trajectories if t.termination_reason == "model_error"]
    assert [t.rollout_id for t in failed] == [FAILING_ROLLOUT] and not failed[0].trainable

    for step, inputs in enumerate(trainer.loss_inputs):
        group = trajectories[step * GENERATIONS : (step + 1) * GENERATIONS]
        rewards = seen_rewards[step]
        # TRL shuffles the rows of a generation batch: match each row to its rollout.
        expected = {t.rollout_id: _stitched(t) for t in group}
        unmatched = {t.rollout_id: t for t in group}
        scored = [r for r in rewards if r is not None]
        mean = sum(scored) / len(scored)
        std = math.sqrt(sum((r - mean) ** 2 for r in scored) / (len(scored) - 1))
        for row in range(GENERATIONS):
            prompt = _unpadded(inputs["prompt_ids"][row], inputs["prompt_mask"][row])
            ids = _unpadded(inputs["completion_ids"][row], inputs["completion_mask"][row])
            env_mask = [int(m) for m in inputs["tool_mask"][row][: len(ids)].tolist()]
            advantage = inputs["advantages"][row].item()
            if not any(env_mask):
                # The model_error rollout: nothing of it reaches the loss, advantage 0.
                trajectory = unmatched.pop(failed[0].rollout_id)
                assert advantage == 0.0
                continue
            rollout_id = next(r for r in unmatched if expected[r] == (prompt, ids, env_mask))
            trajectory = unmatched.pop(rollout_id)
            assert trajectory.trainable and trajectory.token_prefix_breaks == 0
            # The ids TRL trained on with mask 1 are exactly what the server sampled.
            calls = [c for c in trajectory.model_calls if c.completion_token_ids]
            assert all(tuple(c.completion_token_ids or ()) in sampled for c in calls)
            assert [t for t, m in zip(ids, env_mask, strict=True) if m] == [
                token for c in calls for token in c.completion_token_ids or ()
            ]
            # Tool results (and the template around them) are masked out.
            tool_turns = sum(1 for m in trajectory.messages or () if m["role"] == "tool")
            assert (0 in env_mask) == (tool_turns > 0)
            # TRL's advantage: the group-normalised benchmax scalar (failure left out).
            reward = sum(trajectory.rewards.values())
            assert advantage == pytest.approx((reward - mean) / (std + 1e-4), abs=1e-4)
        assert not unmatched
        # The rewards TRL saw are benchmax's declared scalars, None for the failure.
        assert sorted(r for r in rewards if r is not None) == sorted(
            sum(t.rewards.values()) for t in group if t.trainable
        )
        assert rewards.count(None) == sum(1 for t in group if not t.trainable)

    # The server's logprobs are the trainer's own: the first step's samples, scored by the
    # initial weights, give back the logprobs the server reported (rounded to 1e-5).
    initial = build_model(tokenizer)
    initial.load_state_dict(before, strict=False)
    for trajectory in trajectories[:GENERATIONS]:
        for call in trajectory.model_calls:
            if not call.completion_token_ids:
                continue
            prompt = list(call.prompt_token_ids or ())
            sampled = list(call.completion_token_ids)
            with torch.no_grad():
                logits = initial(torch.tensor([prompt + sampled])).logits[0].float()
            scores = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
            mine = scores[torch.arange(len(sampled)), torch.tensor(sampled)].tolist()
            assert mine == pytest.approx(list(call.completion_logprobs or ()), abs=1e-4)

    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert changed, "no weight changed after two optimizer steps"
