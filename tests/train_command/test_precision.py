"""``benchmax train`` precision, batching and the numbers it reports, on CPU.

Real ``benchmax train`` subprocesses on a tiny Qwen2 built from a config (and saved in bf16
for the master-weights test), plus one in-process TRL step checking that the advantage stats
benchmax records are the advantages TRL trained with. Run with
``uv run --group trl pytest -m train tests/train_command/test_precision.py -p no:randomly``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
from safetensors.torch import load_file
from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.results import RunDirectory, read_results, trl_advantages
from benchmax.training import TrainConfig, read_metrics

pytestmark = pytest.mark.train

REPO = Path(__file__).resolve().parents[2]
ARITHMETIC = REPO / "examples" / "arithmetic"
SIGNAL = f"{Path(__file__).parent / 'signal_env.py'}:LengthSignalEnv"
PLAIN = f"{ARITHMETIC}/env.py:ArithmeticEnv"
RUN_SECONDS = 900


def train_run(
    target: str, model: Path, output: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = [
        target,
        "--data", str(ARITHMETIC),
        "--model", str(model),
        "--output-dir", str(output),
        "-k", "2",
        "--prompts-per-step", "2",
        "--max-tokens", "6",
        "--eval-examples", "2",
        "--eval-group-size", "2",
        "--seed", "3",
        *extra,
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "train", *args],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def saved_model(directory: Path, dtype: torch.dtype) -> Path:
    tokenizer = build_tokenizer()
    build_model(tokenizer).to(dtype).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def tokens(output: Path) -> list[tuple[str, list[int]]]:
    return sorted(
        (r.rollout_id, list(r.model_calls[0].completion_token_ids or ()))
        for r in read_results(output / "rollouts.jsonl").rollouts
    )


def test_a_bf16_checkpoint_trains_with_fp32_master_weights(tmp_path: Path) -> None:
    """At lr 1e-5 a bf16 weight cannot move (its spacing is ~1e-4 at 0.02): the run loads fp32
    masters, trains under bf16 autocast and saves fp32 weights, nearly all of them moved."""
    model = saved_model(tmp_path / "bf16-model", torch.bfloat16)
    output = tmp_path / "run"
    train_run(SIGNAL, model, output, "--steps", "1", "--learning-rate", "1e-5", "--dtype", "bf16")
    before, after = weights(model), weights(RunDirectory(output).checkpoint(1))
    assert {t.dtype for t in before.values()} == {torch.bfloat16}
    assert {t.dtype for t in after.values()} == {torch.float32}
    name = "model.layers.0.self_attn.q_proj.weight"
    moved = (after[name] != before[name].float()).float().mean().item()
    assert moved > 0.9, moved
    line = next(iter(read_metrics(output / "metrics.jsonl")))
    assert line["trainer"]["grad_norm"] > 0
    # bf16 autocast in the trainer vs the fp32 sampler: a small, measured gap
    assert 0 < line["trainer"]["logprob_gap"] < 0.05


def test_micro_batches_give_the_same_update_as_one_batch(tmp_path: Path) -> None:
    model = saved_model(tmp_path / "model", torch.float32)
    runs = {}
    for micro in ("4", "1"):
        output = tmp_path / f"micro-{micro}"
        train_run(
            SIGNAL, model, output,
            "--steps", "1", "--learning-rate", "1e-3", "--dtype", "fp32",
            "--micro-batch-size", micro, "--no-gradient-checkpointing", "--eval-temperature", "0",
        )  # fmt: skip
        runs[micro] = output
    assert tokens(runs["4"]) == tokens(runs["1"])  # the same rollouts trained
    one, four = (next(iter(read_metrics(runs[m] / "metrics.jsonl")))["trainer"] for m in ("4", "1"))
    assert one["grad_norm"] == pytest.approx(four["grad_norm"], rel=1e-4)
    base = weights(model)
    whole, split = (weights(RunDirectory(runs[m]).checkpoint(1)) for m in ("4", "1"))
    for name, start in base.items():
        step = whole[name] - start
        assert torch.allclose(split[name] - start, step, atol=2e-5), name
    assert max((whole[n] - base[n]).abs().max().item() for n in base) > 5e-4  # it moved
    # fp32 everywhere at T = 1: the sampler's logprobs are the trainer's
    assert one["logprob_gap"] < 1e-4 and four["logprob_gap"] < 1e-4
    # --eval-temperature 0: greedy evaluations, one reply per example, while training sampled
    evaluation = read_results(runs["1"] / "eval" / "step-1.jsonl")
    assert evaluation.definition["sampling_args"]["temperature"] == 0
    replies: dict[str, set[str]] = {}
    for rollout in evaluation.rollouts:
        reply = rollout.messages[-1]
        assert reply["role"] == "assistant" and reply["content"]
        replies.setdefault(rollout.example_id, set()).add(str(reply["content"]))
    assert replies and all(len(seen) == 1 for seen in replies.values())
    sampled: dict[str, set[str]] = {}  # training at T = 1: replies of a group differ
    for rollout in read_results(runs["1"] / "rollouts.jsonl").rollouts:
        sampled.setdefault(rollout.example_id, set()).add(str(rollout.messages[-1]["content"]))
    assert any(len(seen) > 1 for seen in sampled.values())


def test_the_sequence_budget_and_checkpoint_retention(tmp_path: Path) -> None:
    model = saved_model(tmp_path / "model", torch.float32)
    output = tmp_path / "run"
    budget = 74  # the prompts are 71-73 tokens: replies are cut at 1-3 tokens
    done = train_run(
        PLAIN, model, output,
        "--steps", "2", "--save-every", "1", "--save-total-limit", "1",
        "--max-sequence-tokens", str(budget),
    )  # fmt: skip
    rollouts = read_results(output / "rollouts.jsonl").rollouts
    lengths = []
    for rollout in rollouts:
        for call in rollout.model_calls:
            total = len(call.prompt_token_ids or ()) + len(call.completion_token_ids or ())
            assert total <= budget
            lengths.append(len(call.completion_token_ids or ()))
        assert rollout.termination_reason in ("output_exceeded", "finished", "context_exceeded")
    assert lengths and max(lengths) < 6
    assert RunDirectory(output).checkpoint_steps() == [2]
    shown = done.stdout + done.stderr  # the progress display writes to stderr
    assert f"removed {RunDirectory(output).checkpoint(1)} (--save-total-limit 1)" in shown


class _Hooks:
    def step_begun(self, step: int) -> None:
        pass

    def step_ended(self, step: int) -> tuple[bool, bool]:
        return False, False

    def tracker_logs(self, step: int) -> dict[str, float]:
        return {}

    def logged(self, step: int, logs: Any) -> None:
        pass

    def saved(self, step: int, checkpoint: Path) -> None:
        pass


@pytest.mark.parametrize(
    ("loss", "scale", "expected_scaling"),
    [
        ("dapo", "auto", "group"),
        ("dr_grpo", "auto", "none"),
        ("grpo", "batch", "batch"),
    ],
)
def test_the_recorded_advantages_are_the_ones_trl_trained_with(
    tmp_path: Path, loss: str, scale: str, expected_scaling: str
) -> None:
    from benchmax.training._trl_backend import grpo_config, make_trainer
    from benchmax.training._trl_rollouts import REWARD_KEY, benchmax_reward

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    config = TrainConfig(
        model="tiny",
        output_dir=tmp_path / "run",
        steps=1,
        group_size=4,
        prompts_per_step=2,
        loss=loss,
        scale_rewards=scale,
        micro_batch_size=4,
        dtype="fp32",
        gradient_checkpointing=False,
    )
    assert config.advantage_scaling == expected_scaling
    assert grpo_config(config, tmp_path / "c").scale_rewards == expected_scaling
    rewards: list[float | None] = [0.0, 0.5, 1.0, None, 0.2, 0.2, 0.9, 0.1]

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        count = len(prompts)
        return {
            "prompt_ids": [[5, 6, 7]] * count,
            "completion_ids": [[8 + i, 9, 10] for i in range(count)],
            "logprobs": [[-1.0, -1.0, -1.0]] * count,
            REWARD_KEY: rewards[:count],
        }

    rows = [{"prompt": [{"role": "user", "content": f"q{i}"}]} for i in range(2)]
    trainer = make_trainer(
        config,
        model=model,
        tokenizer=tokenizer,
        dataset_rows=rows,
        reward=benchmax_reward,
        rollout_func=rollout,
        hooks=_Hooks(),
        checkpoints=tmp_path / "c",
    )
    trainer.train()
    trained = list(trainer._logs["advantages"])  # what TRL trained with (its completions log)
    groups = trl_advantages([rewards[:4], rewards[4:]], expected_scaling)
    ours = [advantage for group in groups for advantage in group]
    assert trained == pytest.approx(ours, rel=1e-5, abs=1e-6)
