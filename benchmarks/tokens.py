"""Exact tokens (issue 17 part 3): throughput with tokens on and off, reader cost, bytes on disk.

A keep-alive server in its own process (``_token_server.py``) answers every call with a
1,000-token completion; a request asking for tokens gets them (vLLM's shape: prompt ids,
completion ids, one logprobs entry per token), about 70 KB of JSON. In this process, 32
requests in flight, interleaved on fresh event loops, best of ``--repeats``:

1. a bare aiohttp + orjson loop posting the token request and parsing the same bodies;
2. BaseEnv single-turn rollouts with ``record_tokens=True`` through
   ``benchmax.training.collect_group`` (groups of 8, 4 groups in flight), the trajectories
   with their tokens kept;
3. the same rollouts with tokens off (the server then sends the message without tokens).

Then, on one canned reply: ``read_call_tokens`` microseconds per call, and the bytes the
call's token data takes as compact JSON (completion ids + logprobs; prompt ids apart).
Target: tokens on >= 50% of the bare loop; <= ~16 KB per 1,000-token completion.

    uv run python benchmarks/tokens.py [--repeats 3] [--rollouts 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from _harness import HERE, run_workers, server_process
from _token_server import replies

from benchmax._modelhttp import TOKEN_REQUEST_FIELDS, CallTokens, read_call_tokens
from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example, RolloutRequest
from benchmax.training import collect_group
from benchmax.trajectory import ModelCall, Trajectory

GROUP_SIZE = 8
CONCURRENCY = 32
COMPLETION_TOKENS = 1000
PROMPT = [{"role": "user", "content": "Write a thousand tokens."}]
EXAMPLE = Example(id="e", payload={"prompt_messages": PROMPT})


class LongAnswerEnv(BaseEnv):
    reward_keys = ("long",)
    max_turns = 1

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([EXAMPLE])

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"long": float(len(rollout.messages[-1]["content"] or "") > 1000)}


async def bare_loop(origin: str, requests: int) -> float:
    url = f"{origin}/v1/chat/completions"
    body = orjson.dumps({"model": "m", "messages": PROMPT, **TOKEN_REQUEST_FIELDS})
    headers = {"Authorization": "Bearer bench", "Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def post() -> int:
            async with session.post(url, data=body, headers=headers) as response:
                reply = orjson.loads(await response.read())
            assert len(reply["choices"][0]["token_ids"]) == COMPLETION_TOKENS
            return 1

        await run_workers(CONCURRENCY, CONCURRENCY * 2, post)
        wall, _, done = await run_workers(CONCURRENCY, requests, post)
    return done / wall


async def rollouts(origin: str, count: int, *, tokens: bool) -> float:
    env = LongAnswerEnv(record_tokens=tokens)
    auth = StaticBearerAuth("bench")
    counter = 0
    kept = 0

    async def group() -> int:
        nonlocal counter, kept
        counter += 1
        requests = [
            RolloutRequest(
                rollout_id=f"g{counter}-r{k}",
                example=EXAMPLE,
                model="m",
                base_url=f"{origin}/sessions/g{counter}-r{k}/v1",
                model_auth=auth,
            )
            for k in range(GROUP_SIZE)
        ]
        group = await collect_group(env, requests)
        assert all(o.rewards == {"long": 1.0} for o in group.outcomes.values()), group
        kept += sum(call.has_tokens for t in group.trajectories for call in t.model_calls)
        return GROUP_SIZE

    workers = CONCURRENCY // GROUP_SIZE
    try:
        await run_workers(workers, workers * 2, group)
        before = kept
        wall, _, done = await run_workers(workers, count // GROUP_SIZE, group)
    finally:
        await env.aclose()
    assert kept - before == (done if tokens else 0)
    return done / wall


def reader_and_size() -> tuple[float, int, int, int]:
    """(µs per read_call_tokens, reply bytes, bytes the call's completion ids + logprobs add
    to a results line, bytes its 200 prompt ids add)."""
    with_tokens, _ = replies(COMPLETION_TOKENS, 200)
    raw = with_tokens.split(b"\r\n\r\n", 1)[1]
    decoded = orjson.loads(raw)
    tokens = read_call_tokens(decoded)
    assert isinstance(tokens, CallTokens)
    loops = 300
    started = time.perf_counter()
    for _ in range(loops):
        read_call_tokens(decoded)
    per_call = (time.perf_counter() - started) / loops * 1e6

    def line(call: ModelCall) -> int:
        record = Trajectory(
            rollout_id="r", example_id="e", termination_reason="finished", rewards={},
            model_calls=(call,),
        )  # fmt: skip
        return len(orjson.dumps(record.to_json()))

    bare = line(ModelCall())
    prompt = line(ModelCall(prompt_token_ids=tokens.prompt_token_ids)) - bare
    completion = (
        line(
            ModelCall(
                completion_token_ids=tokens.completion_token_ids,
                completion_logprobs=tokens.completion_logprobs,
            )
        )
        - bare
    )
    return per_call, len(raw), completion, prompt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=2000)
    arguments = parser.parse_args()
    best = {"bare": 0.0, "on": 0.0, "off": 0.0}
    command = [str(HERE / "_token_server.py"), "--tokens", str(COMPLETION_TOKENS)]
    with server_process(command) as origin:
        for _ in range(arguments.repeats):
            best["bare"] = max(best["bare"], asyncio.run(bare_loop(origin, arguments.rollouts)))
            best["on"] = max(
                best["on"], asyncio.run(rollouts(origin, arguments.rollouts, tokens=True))
            )
            best["off"] = max(
                best["off"], asyncio.run(rollouts(origin, arguments.rollouts, tokens=False))
            )
    per_call, reply_bytes, completion_bytes, prompt_bytes = reader_and_size()
    shape = f"{COMPLETION_TOKENS}-token completions, {CONCURRENCY} in flight"
    print(f"{shape}, best of {arguments.repeats}:")
    print(f"  bare aiohttp + orjson loop (token bodies): {best['bare']:8.0f} requests/s")
    print(
        f"  BaseEnv rollouts, tokens on:               {best['on']:8.0f} rollouts/s"
        f"  ({best['on'] / best['bare']:.0%} of the bare loop; target >= 50%)"
    )
    print(f"  BaseEnv rollouts, tokens off:              {best['off']:8.0f} rollouts/s")
    print(
        f"read_call_tokens: {per_call:.0f} µs per 1,000-token reply ({reply_bytes / 1024:.0f} KiB)"
    )
    print(
        f"results line per call: completion ids + logprobs {completion_bytes:,} bytes"
        f" (target <= ~16 KB); 200 prompt ids {prompt_bytes:,} bytes"
    )


if __name__ == "__main__":
    main()
