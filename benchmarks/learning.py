"""Does ``benchmax train`` learn? SmolLM2-135M-Instruct on CPU, four measurements.

    uv run --group trl python benchmarks/learning.py curve [--steps 40] [--screenshot PNG]
    uv run --group trl python benchmarks/learning.py parity [--seeds 0 1 2 3 4] [--steps 10]
    uv run --group trl python benchmarks/learning.py heldout --env tools [--steps 10]
    uv run --group trl python benchmarks/learning.py heldout --env agents [--steps 10]

* ``curve`` trains with ``benchmax.training.train`` on ``examples/arithmetic`` and prints
  the training reward (scalar: ``correct`` + ``bare``, 0 to 2) over the first 5 and the last
  5 steps with percentile-bootstrap 95% intervals, held-out base vs final (``benchmax
  compare``'s paired intervals) and seconds per step; ``--screenshot PNG`` saves the
  training page as headless Chromium draws it.
* ``parity`` runs, per seed, ``benchmax train`` and a plain TRL script with TRL's own
  ``generate`` (alternated, so the shared machine's load falls on both), with the same
  ``GRPOConfig`` (benchmax's own ``grpo_config``: loss, beta, epsilon, scale_rewards,
  constant learning rate, batch shape, seed), the same model in the same dtype, the same
  prompts in the same order and the same reward, where a reply cut by ``max_tokens`` scores
  0 on both sides (benchmax settles it as ``output_exceeded`` with zero rewards). The rise
  of a run is the mean training reward of its second half of steps minus its first half.
  Printed: per-seed rises, each side's mean, and the percentile-bootstrap 95% interval of
  mean(benchmax) - mean(TRL) over seeds.
* ``heldout`` trains ``benchmax train`` on a tool environment (``--env tools``:
  ``examples/calculator``) or an ``AgentEnv`` program (``--env agents``:
  ``examples/agents`` ``StreamingAgent``, an unmodified OpenAI-SDK program run as a
  subprocess through the capture endpoint) with the built-in model, and prints held-out
  reward base vs final with ``benchmax compare``'s paired bootstrap intervals of the rise.

``--json PATH`` adds the figures to a results file (``benchmarks/results/learning.json``)
for ``benchmarks/render_performance.py``.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from benchmax.cli._compare_command import render_comparison
from benchmax.results import RunDirectory, bootstrap_interval, read_results
from benchmax.results._training_page import write_training_page
from benchmax.training import TrainConfig, read_metrics, train

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # examples.*
sys.path.insert(0, str(REPO / "benchmarks"))  # _results

from examples.arithmetic.env import ArithmeticEnv  # noqa: E402

_INTEGER = re.compile(r"-?\d+")  # as ArithmeticEnv.compute_reward reads a reply

TITLE = "Does it learn?"
ABOUT = (
    "`benchmarks/learning.py` trains SmolLM2-135M-Instruct (the built-in model) on CPU: "
    "`curve` (40 steps on `examples/arithmetic`, training reward and held-out base vs final), "
    "`parity` (per seed, `benchmax train` and TRL's own generation loop with the same "
    "`GRPOConfig`, model, prompts and reward; the rise is the second half's mean training "
    "reward minus the first half's), and `heldout` (a tool environment and an `AgentEnv` "
    "program: held-out reward base vs final with paired bootstrap intervals)."
)


def _difference_interval(
    first: Sequence[float], last: Sequence[float], resamples: int = 2000
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of mean(last) - mean(first), resampling each."""
    rng = random.Random(0)
    means = sorted(
        statistics.fmean(rng.choices(last, k=len(last)))
        - statistics.fmean(rng.choices(first, k=len(first)))
        for _ in range(resamples)
    )
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def _step_rewards(rollouts: Path, steps: Sequence[int]) -> list[float]:
    wanted = set(steps)
    return [
        math.fsum(r.rewards.values()) for r in read_results(rollouts).rollouts if r.step in wanted
    ]


def _rise(per_step: Sequence[Sequence[float]]) -> float:
    """Mean reward of the second half of the steps minus the first half's."""
    half = len(per_step) // 2
    first = [value for step in per_step[:half] for value in step]
    last = [value for step in per_step[len(per_step) - half :] for value in step]
    return statistics.fmean(last) - statistics.fmean(first)


def _screenshot(page: Path, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
        )
        view = browser.new_page(viewport={"width": 1400, "height": 900})
        view.goto(page.resolve().as_uri())
        view.wait_for_selector("body[data-ready=true]")
        view.locator("#training").screenshot(path=str(png))
        browser.close()


def curve(args: argparse.Namespace) -> None:
    config = TrainConfig(
        target="examples/arithmetic/env.py:ArithmeticEnv",
        data=REPO / "examples" / "arithmetic",
        model=args.model,
        output_dir=args.output,
        steps=args.steps,
        group_size=4,
        prompts_per_step=2,
        learning_rate=2e-5,
        temperature=0.7,
        max_tokens=16,
        eval_group_size=2,
        save_every=0,
        seed=0,
    )
    started = time.perf_counter()
    result = train(config, ArithmeticEnv)
    wall = time.perf_counter() - started
    layout = RunDirectory(result.output_dir)
    lines = list(read_metrics(layout.metrics))
    steps = [line["step"] for line in lines]
    first = _step_rewards(layout.rollouts, steps[:5])
    last = _step_rewards(layout.rollouts, steps[-5:])
    console = Console()
    console.print(
        f"[bold]{config.model}[/] on examples/arithmetic: {len(steps)} steps, "
        f"{config.prompts_per_step} x {config.group_size} rollouts per step"
    )
    for name, values in (("first 5 steps", first), ("last 5 steps", last)):
        low, high = bootstrap_interval(values)
        console.print(
            f"train reward, {name}: {statistics.fmean(values):.3f} "
            f"[{low:.3f}, {high:.3f}] over {len(values)} rollouts"
        )
    low, high = _difference_interval(first, last)
    console.print(
        f"last 5 - first 5: {statistics.fmean(last) - statistics.fmean(first):+.3f} "
        f"[{low:+.3f}, {high:+.3f}]"
    )
    if result.comparison is not None:
        base, final = layout.eval_file(0), layout.eval_file(layout.eval_steps()[-1])
        console.print("[bold]held out (eval split), base vs final:[/]")
        render_comparison(result.comparison, base, final, console)
    step_seconds = statistics.fmean(line["seconds"]["step"] for line in lines)
    generation = statistics.fmean(line["seconds"]["generation"] or 0.0 for line in lines)
    console.print(
        f"seconds per step: {step_seconds:.1f} (generation {generation:.1f}, the trainer "
        f"{step_seconds - generation:.1f}; evaluations not included); whole run {wall:.0f} s"
    )
    page = write_training_page(layout.root)
    console.print(f"training page: {page.path}")
    if args.screenshot is not None:
        _screenshot(page.path, args.screenshot)
        console.print(f"screenshot: {args.screenshot}")


def _parity_config(args: argparse.Namespace, seed: int, output: Path) -> TrainConfig:
    return TrainConfig(
        target="examples/arithmetic/env.py:ArithmeticEnv",
        data=REPO / "examples" / "arithmetic",
        model=args.model,
        output_dir=output,
        steps=args.steps,
        group_size=args.group_size,
        prompts_per_step=1,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        max_tokens=16,
        eval_examples=1,  # the evaluations are not what parity compares: keep them small
        eval_group_size=1,
        save_every=0,
        seed=seed,
    )


def _benchmax_rewards(config: TrainConfig) -> list[list[float]]:
    """``benchmax train``'s training rewards (scalar), one list per step."""
    result = train(config, ArithmeticEnv)
    rollouts = read_results(RunDirectory(result.output_dir).rollouts).rollouts
    by_step: dict[int, list[float]] = {}
    for rollout in rollouts:
        if rollout.step is not None:
            by_step.setdefault(rollout.step, []).append(math.fsum(rollout.rewards.values()))
    return [by_step[step] for step in sorted(by_step)]


def _trl_rewards(config: TrainConfig) -> list[list[float]]:
    """A plain TRL script: ``GRPOTrainer`` with its own ``generate``, benchmax's
    ``GRPOConfig`` for ``config``, the same model, prompts and reward. Training rewards
    (scalar), one list per step."""
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    from benchmax.integrations.trl import dataset_rows, load_examples
    from benchmax.training import load_model
    from benchmax.training._trl_backend import grpo_config

    torch.set_num_threads(config.torch_threads)
    env = ArithmeticEnv()
    examples = load_examples(env, "train", config.data, max_examples=config.max_examples)
    answers = {example.id: int(example.payload["answer"]) for example in examples}
    model, tokenizer = load_model(config.model, dtype=torch.float32)  # as benchmax train's masters
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    eos = tokenizer.eos_token_id
    per_step: list[list[float]] = []
    batch = config.prompts_per_step * config.group_size

    def reward(
        completions: list[Any],
        completion_ids: list[list[int]],
        example_id: list[str],
        **kwargs: Any,
    ) -> list[float]:
        scores = []
        for completion, ids, key in zip(completions, completion_ids, example_id, strict=True):
            if not ids or ids[-1] != eos:  # cut by max_tokens: output_exceeded, zero rewards
                scores.append(0.0)
                continue
            reply = completion[0]["content"].strip()
            found = _INTEGER.findall(reply)
            correct = any(int(number) == answers[key] for number in found)
            bare = _INTEGER.fullmatch(reply) is not None
            scores.append(float(correct) + float(bare))
        if not per_step or len(per_step[-1]) >= batch:
            per_step.append([])
        per_step[-1].extend(scores)
        return scores

    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=grpo_config(config, Path(out)),
            train_dataset=Dataset.from_list(dataset_rows(examples)),
            reward_funcs=[reward],
        )
        trainer.remove_callback(PrinterCallback)  # as benchmax train: no per-step log dicts
        trainer.train()
    return per_step


def _seed_interval(
    ours: Sequence[float], theirs: Sequence[float], resamples: int = 5000
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of mean(ours) - mean(theirs), seeds resampled."""
    return _difference_interval(theirs, ours, resamples)


def parity(args: argparse.Namespace) -> None:
    console = Console()
    rises: dict[str, list[float]] = {"benchmax": [], "TRL": []}
    runs: list[tuple[str, int, Callable[[TrainConfig], list[list[float]]]]] = []
    for seed in args.seeds:
        runs += [("benchmax", seed, _benchmax_rewards), ("TRL", seed, _trl_rewards)]
    rows: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        try:
            for name, seed, run in runs:
                started = time.perf_counter()
                config = _parity_config(args, seed, Path(scratch) / f"{name}-{seed}")
                per_step = run(config)
                rise = _rise(per_step)
                rises[name].append(rise)
                rows.setdefault(seed, {})[name] = rise
                console.print(
                    f"seed {seed} {name}: rise {rise:+.3f} (steps {len(per_step)}, first step "
                    f"{statistics.fmean(per_step[0]):.2f}, last "
                    f"{statistics.fmean(per_step[-1]):.2f}; {time.perf_counter() - started:.0f} s)"
                )
        except KeyboardInterrupt:  # Ctrl-C: report the seeds both sides finished
            console.print("interrupted: reporting the seeds both sides finished")
    done = [seed for seed in args.seeds if len(rows.get(seed, {})) == 2]
    if not done:
        console.print("no seed finished on both sides")
        return
    ours, theirs = rises["benchmax"][: len(done)], rises["TRL"][: len(done)]
    mean_ours, mean_theirs = statistics.fmean(ours), statistics.fmean(theirs)
    low, high = _seed_interval(ours, theirs)
    console.print(f"{'seed':>4} {'benchmax':>9} {'TRL':>7}")
    for seed in done:
        console.print(f"{seed:>4} {rows[seed]['benchmax']:+9.3f} {rows[seed]['TRL']:+7.3f}")
    console.print(
        f"mean {mean_ours:+9.3f} {mean_theirs:+7.3f}; benchmax - TRL {mean_ours - mean_theirs:+.3f}"
        f" [{low:+.3f}, {high:+.3f}] (95% bootstrap over {len(done)} seeds)"
    )
    if args.json is not None:
        from _results import record, table

        record(
            args.json,
            title=TITLE,
            about=ABOUT,
            tables=[
                table(
                    ["seed", "benchmax rise", "TRL rise"],
                    [[s, f"{rows[s]['benchmax']:+.3f}", f"{rows[s]['TRL']:+.3f}"] for s in done]
                    + [
                        ["mean", f"{mean_ours:+.3f}", f"{mean_theirs:+.3f}"],
                        [
                            "benchmax - TRL [95% CI]",
                            f"{mean_ours - mean_theirs:+.3f} [{low:+.3f}, {high:+.3f}]",
                            "",
                        ],
                    ],
                    caption=(
                        f"parity: {args.steps} steps x 1 prompt x {args.group_size} rollouts, "
                        f"lr {args.learning_rate:g}, temperature {args.temperature:g}, "
                        "up to 16 tokens; rise = second half's mean training reward (0-2) "
                        "minus the first half's"
                    ),
                )
            ],
        )


def _calculator_data() -> Path:
    """``examples/calculator`` ships only an eval split: a train split of 200 other rows
    (seeded, the same ranges) beside a copy of it, in a temporary directory."""
    import json
    import shutil

    folder = Path(tempfile.mkdtemp(prefix="calculator-"))
    shutil.copy(REPO / "examples" / "calculator" / "eval.jsonl", folder / "eval.jsonl")
    rng = random.Random(1)
    rows = []
    for _ in range(200):
        a, b, c = rng.randint(1, 60), rng.randint(1, 60), rng.randint(2, 12)
        rows.append(json.dumps({"a": a, "b": b, "c": c, "answer": (a + b) * c}))
    (folder / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def heldout(args: argparse.Namespace) -> None:
    if args.env == "tools":
        from examples.calculator.env import CalculatorEnv

        factory: Callable[..., Any] = CalculatorEnv
        target, data = "examples/calculator/env.py:CalculatorEnv", _calculator_data()
    else:
        from examples.agents.env import StreamingAgent

        factory = StreamingAgent
        target, data = "examples/agents/env.py:StreamingAgent", REPO / "examples" / "agents"
    config = TrainConfig(
        target=target,
        data=data,
        model=args.model,
        output_dir=args.output,
        steps=args.steps,
        group_size=args.group_size,
        prompts_per_step=args.prompts_per_step,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        eval_examples=args.eval_examples,
        eval_group_size=2,
        save_every=0,
        seed=0,
    )
    started = time.perf_counter()
    result = train(config, factory)
    console = Console()
    layout = RunDirectory(result.output_dir)
    console.print(
        f"[bold]{config.model}[/] on {target}: {config.steps} steps, "
        f"{config.prompts_per_step} x {config.group_size} rollouts per step, "
        f"{time.perf_counter() - started:.0f} s"
    )
    if result.comparison is None:
        console.print("no comparison (the run made no final evaluation)")
        return
    base, final = layout.eval_file(0), layout.eval_file(layout.eval_steps()[-1])
    console.print("[bold]held out (eval split), base vs final:[/]")
    render_comparison(result.comparison, base, final, console)
    if args.json is not None:
        from _results import record, table

        record(
            args.json,
            title=TITLE,
            about=ABOUT,
            tables=[
                table(
                    ["held-out key", "base", "final", "final - base [95% paired CI]"],
                    [
                        [
                            item.key,
                            f"{item.mean_a:.3f}",
                            f"{item.mean_b:.3f}",
                            f"{item.difference:+.3f} "
                            f"[{item.interval[0]:+.3f}, {item.interval[1]:+.3f}]",
                        ]
                        for item in result.comparison.keys
                    ],
                    caption=(
                        f"heldout {args.env}: {target}, {config.steps} steps x "
                        f"{config.prompts_per_step} prompts x {config.group_size} rollouts, "
                        f"lr {config.learning_rate:g}; {result.comparison.matched} eval examples"
                        " x 2"
                    ),
                )
            ],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=("curve", "parity", "heldout"), default="curve")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int)
    parser.add_argument(
        "--output", type=Path, help="run directory (runs/learning; heldout: runs/learning-ENV)"
    )
    parser.add_argument("--screenshot", type=Path, help="curve: save the training page")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompts-per-step", type=int, default=2, help="heldout only")
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=64, help="heldout only")
    parser.add_argument("--eval-examples", type=int, default=16, help="heldout only")
    parser.add_argument("--env", choices=("tools", "agents"), default="agents")
    parser.add_argument("--json", type=Path, help="add the figures to this results file")
    args = parser.parse_args()
    if args.output is None:
        suffix = f"-{args.env}" if args.mode == "heldout" else ""
        args.output = REPO / "runs" / f"learning{suffix}"
    if args.mode == "curve":
        args.steps = args.steps or 40
        curve(args)
    elif args.mode == "parity":
        args.steps = args.steps or 10
        parity(args)
    else:
        args.steps = args.steps or 10
        heldout(args)


if __name__ == "__main__":
    main()
