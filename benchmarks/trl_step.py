"""GRPO step time on CPU: benchmax's rollout_func vs TRL's own generation, same tiny model.

    uv run --group trl python benchmarks/trl_step.py [--steps 4]

Both trainers use the tiny random 2-layer Qwen2 and trained tokenizer of the TRL tests
(``tests/trl_training/tiny_policy.py``), one prompt x 4 generations per step, ``use_vllm=False``.

* benchmax: ``RolloutFunc`` runs the calculator example (multi-turn, tools) against the
  embedded ``PolicySampler`` serving the trainer's weights over HTTP (requests in flight
  batched together), with tokens, under the tests' tool-call grammar.
* TRL: its own ``transformers`` generation of the same prompt (single turn, sampling up
  to ``max_completion_length`` = 64 tokens), the same reward shape.

Printed per path: mean seconds per optimizer step (after one warm-up step), and where the
time goes: the generation phase (rollout_func / ``model.generate``), of it the sampler's
busy time (its forward passes), and the rest of the step (TRL's scoring, loss, backward,
optimizer). Sampled tokens per rollout are printed too since they differ between paths.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from examples.calculator.env import CalculatorEnv  # noqa: E402
from tests.trl_training.tiny_policy import (  # noqa: E402
    build_model,
    build_tokenizer,
    calculator_grammar,
)
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from benchmax.integrations.trl import (  # noqa: E402
    RolloutFunc,
    benchmax_reward,
    dataset_rows,
    load_examples,
)
from benchmax.training import PolicySampler  # noqa: E402

GENERATIONS = 4


class StepClock(TrainerCallback):
    """Wall time of each optimizer step."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._started = 0.0

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self._started = time.perf_counter()

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.seconds.append(time.perf_counter() - self._started)


def _config(out: str, steps: int) -> GRPOConfig:
    return GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=GENERATIONS,
        num_generations=GENERATIONS,
        max_steps=steps,
        max_completion_length=64,
        learning_rate=5e-3,
        report_to=[],
        use_cpu=True,
        bf16=False,  # GRPOConfig defaults to bf16 autocast, slow on CPU
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
        logging_steps=1000,
    )


def run_benchmax(steps: int) -> dict[str, float]:
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    env = CalculatorEnv()
    examples = load_examples(env, "eval", ROOT / "examples" / "calculator", max_examples=1)
    clock = StepClock()
    rollout_seconds: list[float] = []
    grammar = calculator_grammar(tokenizer)
    with (
        tempfile.TemporaryDirectory() as out,
        PolicySampler(model, tokenizer, allowed_tokens=grammar) as server,
    ):
        with RolloutFunc(
            env, examples, base_url=server.base_url, model=server.model_name
        ) as rollout:

            def timed(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
                started = time.perf_counter()
                result = rollout(prompts, trainer)
                rollout_seconds.append(time.perf_counter() - started)
                return result

            trainer = GRPOTrainer(
                model=model,
                processing_class=tokenizer,
                args=_config(out, steps),
                train_dataset=Dataset.from_list(dataset_rows(examples)),
                reward_funcs=[benchmax_reward],
                rollout_func=timed,
                callbacks=[clock],
            )
            trainer.train()
        sampled = server.stats.tokens
        generation = server.stats.busy_seconds
    return {
        "step": statistics.mean(clock.seconds[1:]),
        "generation": statistics.mean(rollout_seconds[1:]),
        "sampling": generation / len(rollout_seconds),
        "tokens_per_rollout": sampled / (steps * GENERATIONS),
    }


def run_trl(steps: int) -> dict[str, float]:
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    env = CalculatorEnv()
    examples = load_examples(env, "eval", ROOT / "examples" / "calculator", max_examples=1)
    clock = StepClock()
    generate_seconds: list[float] = []
    tokens: list[int] = []
    original = model.generate

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        output = original(*args, **kwargs)
        generate_seconds.append(time.perf_counter() - started)
        return output

    model.generate = timed_generate  # type: ignore[method-assign]

    def reward(
        completions: list[Any], completion_ids: list[list[int]], **kwargs: Any
    ) -> list[float]:
        tokens.extend(len(ids) for ids in completion_ids)
        return [float(len(c[0]["content"]) % 2) for c in completions]

    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=_config(out, steps),
            train_dataset=Dataset.from_list(dataset_rows(examples)),
            reward_funcs=[reward],
            callbacks=[clock],
        )
        trainer.train()
    return {
        "step": statistics.mean(clock.seconds[1:]),
        "generation": statistics.mean(generate_seconds[1:]),
        "sampling": statistics.mean(generate_seconds[1:]),
        "tokens_per_rollout": statistics.mean(tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    results = {
        "benchmax rollout_func": run_benchmax(args.steps),
        "TRL generation": run_trl(args.steps),
    }
    print(
        f"{'path':<22} {'step s':>7} {'generation s':>13} {'sampling s':>11} {'rest s':>7}"
        f" {'tokens/rollout':>15}"
    )
    for name, r in results.items():
        print(
            f"{name:<22} {r['step']:7.2f} {r['generation']:13.2f} {r['sampling']:11.2f}"
            f" {r['step'] - r['generation']:7.2f} {r['tokens_per_rollout']:15.1f}"
        )


if __name__ == "__main__":
    main()
