"""The quick start against a real vLLM (CPU build, SmolLM2-135M-Instruct): rollouts/s with
exact tokens on and off, in the same run, interleaved, best of ``--repeats``.

Each measurement is ``run_environment`` over the quick start's train split (``--examples``
x ``--group-size`` rollouts, 8 groups in flight, ``max_tokens`` 32, temperature 0.7, a seed
per rollout, so both modes sample the same tokens), results written to a temporary file.
The server is started from the vLLM environment that ``bash .ci/real-servers vllm``
installs (or ``BENCHMAX_VLLM_URL`` names one already running) and stopped at the end.

    uv run python benchmarks/real_vllm.py [--repeats 2] [--examples 8] [--group-size 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))

from env import QuickStartEnv  # noqa: E402
from tests.real_servers._servers import MODEL, running_vllm  # noqa: E402

from benchmax.runner import RunConfig, run_environment  # noqa: E402


@contextmanager
def server() -> Iterator[str]:
    given = os.environ.get("BENCHMAX_VLLM_URL")
    if given:
        yield given.rstrip("/")
        return
    with running_vllm() as running:
        print(f"vLLM ready after {running.start_seconds:.0f} s")
        yield running.base_url


async def measure(base_url: str, tokens: bool, examples: int, group_size: int) -> float:
    with tempfile.TemporaryDirectory() as directory:
        config = RunConfig(
            model=MODEL,
            base_url=base_url,
            split="train",
            base_dir=ROOT / "examples" / "quickstart",
            group_size=group_size,
            max_examples=examples,
            sampling_args={"max_tokens": 32, "temperature": 0.7},
            seed=1,
            tokens=tokens,
            output=Path(directory) / "results.jsonl",
        )
        started = time.perf_counter()
        report = await run_environment(QuickStartEnv(), config)
        seconds = time.perf_counter() - started
    rollouts = examples * group_size
    assert report is not None
    return rollouts / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    args = parser.parse_args()
    best = {False: 0.0, True: 0.0}
    with server() as base_url:
        for repeat in range(args.repeats):
            for tokens in (False, True) if repeat % 2 == 0 else (True, False):
                rate = asyncio.run(measure(base_url, tokens, args.examples, args.group_size))
                best[tokens] = max(best[tokens], rate)
                mode = "on" if tokens else "off"
                print(f"  run {repeat + 1}, tokens {mode}: {rate:.2f} rollouts/s")
    print("| tokens | rollouts/s (best) |")
    print("| --- | --- |")
    print(f"| off | {best[False]:.2f} |")
    print(f"| on | {best[True]:.2f} |")
    print(f"tokens on / off: {best[True] / best[False]:.2f}")


if __name__ == "__main__":
    main()
