"""Results files written by hand for the view, show and compare tests."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

FORMAT = "benchmax.results/1"


def header(run_id: str = "20260101T000000-abcdef", **definition: Any) -> dict[str, Any]:
    return {
        "type": "header",
        "format": FORMAT,
        "run_id": run_id,
        "created_at": "2026-01-01T00:00:00+00:00",
        "benchmax_version": "0.2.1",
        "definition": {
            "env": {"class": "synthetic:Env", "constructor_args": {}},
            "split": "eval",
            "model": "synthetic-model",
            "base_url": "@mock",
            "group_size": definition.pop("group_size", 4),
            "max_examples": None,
            **definition,
        },
    }


def rollout(
    example_index: int,
    example_id: str,
    group_index: int,
    *,
    rewards: Mapping[str, float],
    reason: str = "finished",
    transcript: list[dict[str, Any]] | None = None,
    logs: list[dict[str, Any]] | None = None,
    usage: Mapping[str, int] | None = None,
    run_id: str = "20260101T000000-abcdef",
    with_usage: bool = True,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "rollout",
        "run_id": run_id,
        "split": "eval",
        "example_id": example_id,
        "example_index": example_index,
        "group_index": group_index,
        "rollout_id": f"{run_id}.e{example_index}.a1-0000.r{group_index}",
        "attempt": 1,
        "termination_reason": reason,
        "rewards": dict(rewards),
        "timings": {"group_seconds": 1.5, "model_seconds": 1.0, "tool_seconds": 0.25,
                    "reward_seconds": 0.01},
        "transcript": transcript,
        "logs": logs or [],
    }  # fmt: skip
    if with_usage:
        record["usage"] = None if usage is None else dict(usage)
    return record


def write(path: Path, head: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for line in (head, *records):
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


def grouped(
    example_ids: Sequence[str], values: Sequence[Sequence[float]], key: str = "correct"
) -> list[dict[str, Any]]:
    """One group per example id, its rollouts getting ``values[i]`` for ``key``."""
    return [
        rollout(i, example_id, k, rewards={key: value})
        for i, (example_id, group) in enumerate(zip(example_ids, values, strict=True))
        for k, value in enumerate(group)
    ]


REASONS = ("finished",) * 8 + ("max_turns_exceeded", "model_error")
SYSTEM = "Use the calculator tools, then answer as <answer>N</answer>."
TRACEBACK = "Traceback (most recent call last):\n  ...\nTimeoutError"


def _calculator_transcript(i: int, k: int, a: int, b: int, c: int, answer: int) -> list[Any]:
    call_id = f"call_{i}_{k}_0"
    arguments = json.dumps({"a": a, "b": b})
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Compute ({a} + {b}) * {c} using the tools."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "add", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"result": a + b})},
        {
            "role": "assistant",
            "content": f"<think>{a} + {b} = {a + b}; times {c}.</think>"
            f"The result is <answer>{answer}</answer>.",
        },
    ]


def large_run(path: Path, groups: int = 5000, group_size: int = 4, seed: int = 0) -> Path:
    """``groups * group_size`` tool-using rollouts with realistic transcripts and logs."""
    rng = random.Random(seed)
    records = []
    for i in range(groups):
        a, b, c = rng.randint(1, 99), rng.randint(1, 99), rng.randint(2, 12)
        example_id = f"{i:06d}" + format(rng.getrandbits(64), "016x")
        for k in range(group_size):
            reason = rng.choice(REASONS)
            answer = (a + b) * c if rng.random() < 0.6 else (a + b) * c + rng.randint(1, 9)
            finished = reason == "finished"
            logs = []
            if not finished:
                message = f"base.rollout.model_failed termination_reason={reason}"
                logs.append(
                    {
                        "time": "2026-01-01T00:00:01.000+00:00",
                        "level": "ERROR",
                        "logger": "benchmax.envs.base.env",
                        "message": message,
                        "exception": TRACEBACK,
                    }
                )
            rewards = {
                "correct": float(finished and answer == (a + b) * c),
                "format": float(finished) * rng.choice((0.5, 1.0)),
            }
            usage = {"prompt_tokens": 120 + k, "completion_tokens": 40, "total_tokens": 160 + k}
            records.append(
                rollout(
                    i,
                    example_id,
                    k,
                    rewards=rewards,
                    reason=reason,
                    transcript=_calculator_transcript(i, k, a, b, c, answer),
                    logs=logs,
                    usage=usage,
                )
            )
    return write(path, header(group_size=group_size), records)


def mixed_run(path: Path) -> Path:
    """A file as a long, interrupted and resumed run leaves it: groups written interleaved
    (several in flight), a group cut short by an interruption and run again under attempt 2,
    a complete group superseded by a later attempt (its example id changed), a group with a
    line too many, rewards whose keys appear in different orders (one a NaN), failures,
    usage on some rollouts only, reward weights and a training step."""
    head = header(group_size=3)
    head["reward_weights"] = {"correct": 1.0, "format": 0.5}

    def one(index: int, example_id: str, k: int, attempt: int = 1, **changes: Any) -> Any:
        rewards = changes.pop("rewards", {"correct": float((index + k) % 2), "format": 1.0})
        record = rollout(
            index,
            example_id,
            k,
            rewards=rewards,
            reason=changes.pop("reason", "finished"),
            transcript=[
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": f"question {index}"},
                {"role": "assistant", "content": f"answer {index}.{k} <think>hm</think>"},
            ],
            usage=changes.pop("usage", {"prompt_tokens": 10 + k, "completion_tokens": 5}),
        )
        record["attempt"] = attempt
        record["rollout_id"] = f"r{index}.a{attempt}.{k}"
        record["step"] = 3
        record.update(changes)
        return record

    records = [
        # examples 2 and 0 in flight together, lines interleaved
        one(2, "ex2", 0, rewards={"format": 0.5, "correct": 1.0}),
        one(0, "ex0", 1),
        one(2, "ex2", 2, reason="max_turns_exceeded", rewards={"format": 0.0}),
        one(0, "ex0", 0, usage=None),
        one(2, "ex2", 1, rewards={"correct": float("nan"), "format": 1.0, "extra": 2.0}),
        one(0, "ex0", 2, reason="model_error", rewards={}),
        # example 1: attempt 1 cut short, attempt 2 complete
        one(1, "ex1", 0),
        one(1, "ex1", 2),
        one(1, "ex1", 1, attempt=2),
        one(1, "ex1", 0, attempt=2),
        one(1, "ex1", 2, attempt=2, reason="reward_error", rewards={"correct": 0.0}),
        # example 3: complete, then superseded by attempt 2 under a new id
        *(one(3, "ex3-old", k) for k in range(3)),
        *(one(3, "ex3", k, attempt=2, rewards={"correct": 1.0, "format": 1.0}) for k in (2, 0, 1)),
        # example 4: attempt 1 complete, attempt 2 gets a line too many (not complete)
        *(one(4, "ex4", k, rewards={"correct": 0.0, "format": 0.5}) for k in range(3)),
        *(one(4, "ex4", k, attempt=2) for k in (0, 1, 2, 2)),
        # example 5 cut short at the end of the file
        one(5, "ex5", 0),
    ]
    return write(path, head, records)
