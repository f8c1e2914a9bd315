"""``to_training_samples`` cost per 1,000-token turn, and the record's size and parse time.

Builds trajectories whose model calls each sampled 1,000 tokens (ids and logprobs), with a
500-token first prompt and 60 environment tokens (a tool result and template tokens)
between calls, every call's prompt being the whole conversation so far (so consecutive
calls stitch into one sample). Prints, best of ``--repeats`` runs of ``--loops`` calls:

- ``to_training_samples`` time per turn, for 1, 8 and 32 turns (target: <= 50 us per turn);
- the same with a prefix break on every call (a template that drops earlier reasoning);
- ``Trajectory.from_json`` time per turn and the JSON size per call of a results line.

    uv run python benchmarks/training_samples.py [--repeats 5] [--loops 200]
"""

from __future__ import annotations

import argparse
import json
import random
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


def per_turn_us(work: object, turns: int, repeats: int, loops: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(loops):
            work()  # type: ignore[operator]
        best = min(best, (time.perf_counter() - started) / loops)
    return best / turns * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loops", type=int, default=200)
    args = parser.parse_args()
    print(f"to_training_samples, {COMPLETION:,}-token completions with logprobs (best of "
          f"{args.repeats} x {args.loops}; target <= 50 us per turn)")  # fmt: skip
    for turns in (1, 8, 32):
        record = trajectory(turns)
        assert len(to_training_samples(record)) == 1
        cost = per_turn_us(lambda r=record: to_training_samples(r), turns, args.repeats, args.loops)
        print(f"  {turns:>2} turn(s), stitched:         {cost:7.1f} us per turn")
    broken = trajectory(8, breaks=True)
    assert broken.token_prefix_breaks == 7
    cost = per_turn_us(lambda: to_training_samples(broken), 8, args.repeats, args.loops)
    print(f"   8 turns, a break at every call: {cost:7.1f} us per turn")
    record = trajectory(8)
    line = json.dumps(record.to_json())
    data = json.loads(line)
    cost = per_turn_us(lambda: Trajectory.from_json(data), 8, args.repeats, args.loops // 4 or 1)
    print(f"Trajectory.from_json (8 turns):    {cost:7.1f} us per turn")
    print(f"results line, 8 turns:             {len(line) / 8 / 1024:7.1f} KiB per call "
          "(prompt and completion ids, logprobs as JSON floats)")  # fmt: skip


if __name__ == "__main__":
    main()
