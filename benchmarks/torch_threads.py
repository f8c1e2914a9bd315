"""Seconds to sample a batch on CPU with 1, 2, ... torch threads (which setting to document).

    uv run --group trl python benchmarks/torch_threads.py [--model smollm2-135m-instruct]
        [--threads 1,2] [--rows 8] [--max-tokens 16] [--repeats 3]

Loads the model once (``benchmax.training.load_model``; ``tiny`` is the tests' random
2-layer Qwen2), then, alternating the thread counts so machine load hits each alike, times
the embedded sampler's decoder sampling ``--rows`` completions of ``--max-tokens`` tokens
(one prefill, then one forward pass per token for the whole batch) and one training-shaped
forward + backward pass over the same batch. Prints the median and min seconds per thread
count, and the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmax.training._decoding import BatchDecoder, SamplingParams  # noqa: E402

QUESTION = "Answer the question concisely. Put your final answer in <answer></answer> tags."


def _load(name: str) -> tuple[Any, Any]:
    if name == "tiny":
        from tests.trl_training.tiny_policy import build_model, build_tokenizer

        tokenizer = build_tokenizer()
        return build_model(tokenizer), tokenizer
    from benchmax.training import load_model

    return load_model(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    counts = [int(n) for n in args.threads.split(",")]
    model, tokenizer = _load(args.model)
    prompts = [
        tokenizer.encode(
            tokenizer.apply_chat_template(
                [
                    {"role": "system", "content": QUESTION},
                    {"role": "user", "content": f"What is {n} - 28?"},
                ],
                add_generation_prompt=True,
                tokenize=False,
            ),
            add_special_tokens=False,
        )
        for n in range(args.rows)
    ]
    decoder = BatchDecoder(
        model, tokenizer, version=lambda: 0, max_batch_size=args.rows, max_model_len=2048
    )
    params = [
        SamplingParams(max_tokens=args.max_tokens, seed=n, ignore_eos=True)
        for n in range(args.rows)
    ]
    width = max(len(p) for p in prompts) + args.max_tokens
    batch = torch.tensor([(p + [0] * width)[:width] for p in prompts])
    sampling: dict[int, list[float]] = {n: [] for n in counts}
    training: dict[int, list[float]] = {n: [] for n in counts}
    load_before = os.getloadavg()[0]
    try:
        for _ in range(args.repeats):
            for n in counts:
                torch.set_num_threads(n)
                started = time.perf_counter()
                futures = [decoder.submit(p, s) for p, s in zip(prompts, params, strict=True)]
                for future in futures:
                    future.result()
                sampling[n].append(time.perf_counter() - started)
                started = time.perf_counter()
                model.train()
                model(batch).logits.float().logsumexp(-1).mean().backward()
                model.zero_grad(set_to_none=True)
                training[n].append(time.perf_counter() - started)
    finally:
        decoder.close()
    print(
        f"{args.model}: {args.rows} rows x {args.max_tokens} tokens; "
        f"{os.cpu_count()} CPUs; {args.repeats} repeats"
    )
    print(
        f"{'threads':>7} {'sample median s':>16} {'min s':>7} {'fwd+bwd median s':>17} {'min s':>7}"
    )
    for n in counts:
        print(
            f"{n:>7} {statistics.median(sampling[n]):16.2f} {min(sampling[n]):7.2f}"
            f" {statistics.median(training[n]):17.2f} {min(training[n]):7.2f}"
        )
    print(f"load average (1 min) before {load_before:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
