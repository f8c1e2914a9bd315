"""``to_training_samples`` cost per 1,000-token turn, and the record's size and parse time.

Builds trajectories whose model calls each sampled 1,000 tokens (ids and logprobs), with a
500-token first prompt and 60 environment tokens (a tool result and template tokens)
between calls, every call's prompt being the whole conversation so far (so consecutive
calls stitch into one sample). Prints, per turn, the median over ``--repeats`` runs of the
fastest of ``--loops`` calls:

- ``to_training_samples`` time per turn, for 1, 8 and 32 turns (target: <= 50 us per turn),
  for records as benchmax hands them over (read back from a results line, or recorded by
  ``BaseEnv``, which settles whether each call continues the previous one when it records
  it) and for hand-built records used for the first time (the full prefix comparison,
  which every call paid before the relation was kept with the record);
- the same with a prefix break on every call (a template that drops earlier reasoning);
- 4 parallel conversations of 8 turns each, their calls interleaved (each continues its
  own chain, not the call before it), and 8 turns with every call sent twice (a retry);
- ``Trajectory.from_json`` time per turn and the JSON size per call of a results line.

    uv run python benchmarks/training_samples.py [--repeats 5] [--loops 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import time

from benchmax.training import to_training_samples
from benchmax.trajectory import ModelCall, Trajectory

COMPLETION = 1_000
FIRST_PROMPT = 500
BETWEEN = 60


def trajectory(turns: int, *, breaks: bool = False, seed: int = 0) -> Trajectory:
    rng = random.Random(seed)
    stream = [rng.randrange(150_000) for _ in range(FIRST_PROMPT)]
    calls = []
    for turn in range(turns):
        if turn:
            stream += [rng.randrange(150_000) for _ in range(BETWEEN)]
        prompt = tuple(stream)
        if breaks and turn:
            prompt = (turn, *prompt[1:])  # the first token differs: no call continues
        completion = tuple(rng.randrange(150_000) for _ in range(COMPLETION))
        logprobs = tuple(-rng.random() * 3 for _ in range(COMPLETION))
        calls.append(
            ModelCall(
                prompt_token_ids=prompt,
                completion_token_ids=completion,
                completion_logprobs=logprobs,
            )
        )
        stream += completion
    return Trajectory(
        rollout_id="r", example_id="e", termination_reason="finished", rewards={"r": 1.0},
        model_calls=tuple(calls),
    )  # fmt: skip


def interleaved(chains: int, turns: int) -> Trajectory:
    """``chains`` conversations of ``turns`` turns, their calls taken in turn."""
    parts = [trajectory(turns, seed=chain).model_calls for chain in range(chains)]
    calls = tuple(part[turn] for turn in range(turns) for part in parts)
    return Trajectory(
        rollout_id="r", example_id="e", termination_reason="finished", rewards={"r": 1.0},
        model_calls=calls,
    )  # fmt: skip


def retried(turns: int) -> Trajectory:
    """``turns`` turns, each call sent a second time with the same prompt."""
    calls = trajectory(turns).model_calls
    twice = tuple(c for call in calls for c in (dataclasses.replace(call), call))
    return Trajectory(
        rollout_id="r", example_id="e", termination_reason="finished", rewards={"r": 1.0},
        model_calls=twice,
    )  # fmt: skip


def per_turn_us(work: object, turns: int, repeats: int, loops: int) -> float:
    """Median over ``repeats`` of the fastest of ``loops`` single calls (robust on a
    shared, loaded machine), per turn, in microseconds."""
    bests = []
    for _ in range(repeats):
        best = float("inf")
        for _ in range(loops):
            started = time.perf_counter()
            work()  # type: ignore[operator]
            best = min(best, time.perf_counter() - started)
        bests.append(best)
    return statistics.median(bests) / turns * 1e6


def first_use_per_turn_us(record: Trajectory, turns: int, repeats: int, loops: int) -> float:
    """As :func:`per_turn_us`, each call on a fresh copy of ``record`` (the same id
    tuples, nothing settled yet), as a hand-built trajectory is on its first use."""
    bests = []
    for _ in range(repeats):
        best = float("inf")
        for _ in range(loops):
            fresh = dataclasses.replace(
                record, model_calls=tuple(dataclasses.replace(c) for c in record.model_calls)
            )
            started = time.perf_counter()
            to_training_samples(fresh)
            best = min(best, time.perf_counter() - started)
        bests.append(best)
    return statistics.median(bests) / turns * 1e6


def recorded(record: Trajectory) -> Trajectory:
    """``record`` as ``BaseEnv`` records it: each call checked against the previous one
    once, when it is recorded."""
    assert record.token_prefix_breaks >= 0  # asks every call once, as BaseEnv does
    return record


def read_back(record: Trajectory) -> Trajectory:
    """``record`` written to a results line and read back."""
    return Trajectory.from_json(json.loads(json.dumps(record.to_json())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loops", type=int, default=200)
    args = parser.parse_args()
    repeats, loops = args.repeats, args.loops
    print(f"to_training_samples, {COMPLETION:,}-token completions with logprobs, us per turn "
          f"(median of {repeats} x fastest of {loops}; target <= 50 us per turn)")  # fmt: skip
    print(" " * 35 + "results line   BaseEnv record   hand-built, first use")
    for turns in (1, 8, 32):
        record = trajectory(turns)
        costs = []
        for source in (read_back(record), recorded(trajectory(turns))):
            assert len(to_training_samples(source)) == 1
            work = lambda r=source: to_training_samples(r)  # noqa: E731
            costs.append(per_turn_us(work, turns, repeats, loops))
        costs.append(first_use_per_turn_us(record, turns, repeats, loops))
        print(f"  {turns:>2} turn(s), stitched:         " + "".join(f"{c:13.1f}  " for c in costs))
    broken = trajectory(8, breaks=True)
    assert broken.token_prefix_breaks == 7
    costs = [
        per_turn_us(lambda r=source: to_training_samples(r), 8, repeats, loops)
        for source in (read_back(broken), recorded(trajectory(8, breaks=True)))
    ]
    costs.append(first_use_per_turn_us(broken, 8, repeats, loops))
    print("   8 turns, a break at every call: " + "".join(f"{c:13.1f}  " for c in costs))
    for label, make, calls in (
        ("4 x 8 turns, interleaved chains:", lambda: interleaved(4, 8), 32),
        ("8 turns, every call retried:    ", lambda: retried(8), 16),
    ):
        record = make()
        costs = [
            per_turn_us(lambda r=source: to_training_samples(r), calls, repeats, loops)
            for source in (read_back(record), recorded(make()))
        ]
        costs.append(first_use_per_turn_us(record, calls, repeats, loops))
        print(f"  {label} " + "".join(f"{c:13.1f}  " for c in costs) + "(per call)")
    record = trajectory(8)
    line = json.dumps(record.to_json())
    data = json.loads(line)
    cost = per_turn_us(lambda: Trajectory.from_json(data), 8, repeats, loops // 4 or 1)
    print(f"Trajectory.from_json (8 turns):    {cost:7.1f} us per turn")
    print(f"results line, 8 turns:             {len(line) / 8 / 1024:7.1f} KiB per call "
          "(prompt and completion ids, logprobs as JSON floats)")  # fmt: skip


if __name__ == "__main__":
    main()
