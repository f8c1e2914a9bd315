"""Generation per GRPO step: benchmax's embedded sampler vs TRL's own generation, side by side.

    uv run --group trl python benchmarks/sampler.py [--model tiny|smollm2-135m-instruct|DIR]
        [--prompts 2] [--generations 4] [--max-tokens 16] [--steps 4] [--threads 1]

Both paths run TRL's ``GRPOTrainer`` (``use_vllm=False``) on the same model (the same
weights, copied), the same single-turn prompts (the quick-start environment's train split),
the same batch (``--prompts`` x ``--generations`` rollouts per step), temperature 1.0 and
at most ``--max-tokens`` completion tokens, on this machine, one after the other:

* TRL: its own in-process generation (``transformers`` ``generate`` on the padded batch);
* benchmax: ``RolloutFunc`` runs the rollouts through the environment, over HTTP, against
  ``PolicySampler`` serving the trainer's model (the requests in flight batched together).

What is timed is the trainer's generation phase, ``GRPOTrainer._generate`` (the same call
site on both paths: TRL's tokenizing, sampling and decoding, or the whole ``rollout_func``),
per step after one warm-up step. Printed: mean and min seconds, sampled tokens per rollout,
the ratio benchmax / TRL, and the machine's load (``os.getloadavg``) before and after.
"""

from __future__ import annotations

import argparse
import copy
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
from examples.quickstart.env import QuickStartEnv  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from benchmax.integrations.trl import (  # noqa: E402
    RolloutFunc,
    benchmax_reward,
    dataset_rows,
    load_examples,
)
from benchmax.training import PolicySampler  # noqa: E402


def _config(out: str, args: argparse.Namespace) -> GRPOConfig:
    return GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=args.prompts * args.generations,
        num_generations=args.generations,
        max_steps=args.steps + 1,
        max_completion_length=args.max_tokens,
        temperature=1.0,
        learning_rate=1e-6,
        report_to=[],
        use_cpu=True,
        bf16=False,  # GRPOConfig defaults to bf16 autocast, slow on CPU
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
        logging_steps=1000,
    )


def _timed_generation(trainer: GRPOTrainer, seconds: list[float]) -> None:
    original = trainer._generate

    def timed(prompts: list[Any]) -> Any:
        started = time.perf_counter()
        result = original(prompts)
        seconds.append(time.perf_counter() - started)
        return result

    trainer._generate = timed  # type: ignore[method-assign]


def _lengths(result: dict[str, list[Any]] | None, into: list[int]) -> None:
    if result is not None:
        into.extend(len(ids) for ids in result["completion_ids"])


def run_trl(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, float]:
    env = QuickStartEnv()
    examples = load_examples(env, "train", ROOT / "examples" / "quickstart")
    seconds: list[float] = []
    lengths: list[int] = []

    def reward(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        lengths.extend(len(ids) for ids in completion_ids)
        return [float(len(ids) % 2) for ids in completion_ids]

    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=_config(out, args),
            train_dataset=Dataset.from_list(dataset_rows(examples)),
            reward_funcs=[reward],
        )
        _timed_generation(trainer, seconds)
        trainer.train()
    return _summary(seconds, lengths)


def run_benchmax(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, float]:
    env = QuickStartEnv()
    examples = load_examples(env, "train", ROOT / "examples" / "quickstart")
    seconds: list[float] = []
    lengths: list[int] = []
    batch = args.prompts * args.generations
    with (
        tempfile.TemporaryDirectory() as out,
        PolicySampler(model, tokenizer, max_batch_size=batch) as sampler,
        RolloutFunc(
            env,
            examples,
            base_url=sampler.base_url,
            model=sampler.model_name,
            sampling_args={"temperature": 1.0, "max_tokens": args.max_tokens},
            seed=0,
        ) as rollout,
    ):

        def counted(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
            result = rollout(prompts, trainer)
            lengths.extend(len(ids) for ids in result["completion_ids"])
            return result

        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=_config(out, args),
            train_dataset=Dataset.from_list(dataset_rows(examples)),
            reward_funcs=[benchmax_reward],
            rollout_func=counted,
        )
        _timed_generation(trainer, seconds)
        trainer.train()
        summary = _summary(seconds, lengths)
        summary["mean_batch"] = sampler.stats.mean_batch
    return summary


def _summary(seconds: list[float], lengths: list[int]) -> dict[str, float]:
    timed = seconds[1:] or seconds  # the first step warms up
    return {
        "mean": statistics.mean(timed),
        "min": min(timed),
        "tokens": statistics.mean(lengths) if lengths else 0.0,
    }


def _load(name: str) -> tuple[Any, Any]:
    if name == "tiny":
        from tests.trl_training.tiny_policy import build_model, build_tokenizer

        tokenizer = build_tokenizer()
        return build_model(tokenizer), tokenizer
    from benchmax.training import load_model

    return load_model(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model, tokenizer = _load(args.model)
    print(f"model {args.model}: loaded in {time.perf_counter() - started:.1f} s", flush=True)
    load_before = os.getloadavg()
    results = {
        "TRL generation": run_trl(copy.deepcopy(model), tokenizer, args),
        "benchmax sampler": run_benchmax(copy.deepcopy(model), tokenizer, args),
    }
    load_after = os.getloadavg()
    rollouts = args.prompts * args.generations
    print(
        f"{rollouts} rollouts per step ({args.prompts} prompts x {args.generations}), "
        f"<= {args.max_tokens} tokens, {args.steps} timed steps, torch threads {args.threads}"
    )
    print(f"{'path':<18} {'mean s':>8} {'min s':>8} {'tokens/rollout':>15}")
    for name, r in results.items():
        print(f"{name:<18} {r['mean']:8.3f} {r['min']:8.3f} {r['tokens']:15.1f}")
    ratio = results["benchmax sampler"]["mean"] / results["TRL generation"]["mean"]
    print(
        f"benchmax / TRL (mean): {ratio:.2f}x; sampler rows per step: "
        f"{results['benchmax sampler']['mean_batch']:.1f}"
    )
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
