"""``benchmax traces`` on a generated production log: throughput and peak memory.

    uv run python benchmarks/traces_throughput.py [--size-mb 1024] [--seed 0]

Writes a synthetic LiteLLM proxy log of about ``--size-mb`` MB in a temporary directory
(multi-turn conversations whose calls repeat the growing history, tool calls, failed
calls, exact repeats, malformed lines, and emails, phone numbers, card numbers and API
keys to scrub), then runs ``benchmax traces LOG -o OUT`` in a child process and prints
the logged replies read per second, MB/s and the child's peak RSS (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

_COMMON = (
    "the a of to and in is it for on with as was at by this that from be are or have "
    "please thanks could would should can will what when where why how which who my your"
).split()
_SYLLABLES = "ka lo mi nu pe ra si to vu ze bar den fil gom hut jex kor lum nix pol".split()
_VOCABULARY = sorted(
    {a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in ("", *_SYLLABLES[:6])}
)  # 2,800 content words, drawn with Zipf-like weights


_SYSTEM = "You are the support assistant of Northwind. Answer briefly and politely."


_POPULATION = _COMMON + _VOCABULARY
_CUMULATIVE = list(
    itertools.accumulate([0.3] * len(_COMMON) + [1 / (r + 1) for r in range(len(_VOCABULARY))])
)


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choices(_POPULATION, cum_weights=_CUMULATIVE, k=words))
    roll = rng.random()
    if roll < 0.05:
        text += f" my email is user{rng.randrange(10**6)}@example.com"
    elif roll < 0.08:
        text += f" call me at +1 415 555 {rng.randrange(1000, 9999)}"
    elif roll < 0.09:
        text += " card 4111 1111 1111 1111"
    elif roll < 0.10:
        text += f" key sk-proj-{rng.getrandbits(128):032x}"
    return text.capitalize() + "."


def _call(
    rng: random.Random,
    session: str,
    user: str,
    history: list[dict[str, object]],
    reply: dict[str, object],
) -> dict[str, object]:
    failed = rng.random() < 0.02
    return {
        "id": f"chatcmpl-{rng.getrandbits(48):012x}",
        "trace_id": f"{rng.getrandbits(64):016x}",
        "session_id": session,
        "call_type": "acompletion",
        "status": "failure" if failed else "success",
        "startTime": 1764583201.0 + rng.random() * 86400,
        "endTime": 1764583202.0,
        "model": rng.choice(("gpt-4o-mini", "gpt-4o")),
        "custom_llm_provider": "openai",
        "end_user": user,
        "metadata": {"user_api_key_end_user_id": user},
        "messages": history,
        "response": None
        if failed
        else {"object": "chat.completion", "choices": [{"index": 0, "message": reply}]},
        "error_str": "RateLimitError" if failed else None,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
    }


def generate(path: Path, size_bytes: int, seed: int) -> int:
    """Write the log; return its number of lines."""
    rng = random.Random(seed)
    lines = 0
    written = 0
    with path.open("wb") as file:
        conversation = 0
        while written < size_bytes:
            conversation += 1
            session = f"sess-{conversation}"
            user = f"cust-{rng.randrange(conversation // 3 + 1)}"  # users come back
            history: list[dict[str, object]] = [{"role": "system", "content": _SYSTEM}]
            for _turn in range(rng.randint(1, 6)):
                history.append({"role": "user", "content": _sentence(rng, rng.randint(8, 40))})
                if rng.random() < 0.15:
                    call_id = f"call_{rng.getrandbits(32):08x}"
                    reply: dict[str, object] = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": call_id, "type": "function", "function": {
                            "name": "lookup_order",
                            "arguments": json.dumps({"order": rng.randrange(10**6)}),
                        }}],
                    }  # fmt: skip
                    data = orjson.dumps(_call(rng, session, user, list(history), reply)) + b"\n"
                    file.write(data)
                    written += len(data)
                    lines += 1
                    history.append(reply)
                    history.append({"role": "tool", "tool_call_id": call_id, "content": "shipped"})
                reply = {"role": "assistant", "content": _sentence(rng, rng.randint(10, 60))}
                data = orjson.dumps(_call(rng, session, user, list(history), reply)) + b"\n"
                if rng.random() < 0.01:
                    data += data  # a logger that wrote the call twice
                    lines += 1
                if rng.random() < 0.001:
                    data += b'{"id": "torn\n'
                    lines += 1
                file.write(data)
                written += len(data)
                lines += 1
                history.append(reply)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchmax-traces-") as scratch:
        log = Path(scratch) / "proxy.jsonl"
        started = time.perf_counter()
        lines = generate(log, int(args.size_mb * 1024 * 1024), args.seed)
        size = log.stat().st_size
        print(f"generated {size / 2**20:.0f} MB, {lines:,} lines in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        out = Path(scratch) / "out"
        started = time.perf_counter()
        completed = subprocess.run(
            [sys.executable, "-m", "benchmax.cli", "traces", str(log), "-o", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mb = usage.ru_maxrss / 1024
        cpu = usage.ru_utime + usage.ru_stime
        if completed.returncode != 0:
            print(completed.stdout)
            raise SystemExit(f"benchmax traces exited with {completed.returncode}")
        written = sum(1 for _ in (out / "train.jsonl").open("rb")) + sum(
            1 for _ in (out / "eval.jsonl").open("rb")
        )
        print(completed.stdout)
        print(f"benchmax traces: {seconds:.1f} s wall, {cpu:.1f} s CPU; per wall second "
              f"{lines / seconds:,.0f} log lines, {size / 2**20 / seconds:.1f} MB, "
              f"{written / seconds:,.0f} rows written ({written:,} rows); per CPU second "
              f"{lines / cpu:,.0f} log lines, {written / cpu:,.0f} rows; "
              f"peak RSS {peak_mb:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
