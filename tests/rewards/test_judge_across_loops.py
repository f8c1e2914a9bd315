"""Issue 19 kind 11: one ``Judge`` value used from successive ``asyncio.run()`` calls
(notebooks, scripts, pytest) against a keep-alive server that outlives them.

Whatever ties a judge's client, cap or connection to one event loop must never be reused
by another: every run gets its own pool, opens its own connections (none of an earlier
run's is reused, and each earlier run's are closed when it ends) and finishes within the
judge's deadline (a stalled call fails: no retries). Repeated many times, since the failure
this guards against was intermittent.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmax._modelhttp.connections import loop_pool
from benchmax.auth import StaticBearerAuth
from benchmax.rewards import Judge
from benchmax.testing import MockModelServer

RUNS = 25
CALLS_PER_RUN = 3


@pytest.fixture
def threaded_server() -> Iterator[MockModelServer]:
    """A keep-alive MockModelServer on its own loop in a thread, outliving each asyncio.run."""
    server = MockModelServer(lambda body: '{"score": 1}')
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(60)
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)


def _open_connections(server: MockModelServer) -> int:
    return len(server._connections)  # the server's own count of live connections


@pytest.mark.parametrize("calls", ["sequential", "concurrent"])
def test_one_judge_across_many_asyncio_runs_never_reuses_a_loop_bound_part(
    threaded_server: MockModelServer, calls: str
) -> None:
    judge = Judge(
        "judge",
        threaded_server.base_url,
        StaticBearerAuth("judge-secret-key"),
        timeout=60.0,
        max_retries=0,
        max_concurrent_requests=2,
    )
    pools: list[Any] = []
    seen_connections: set[int] = set()
    for run in range(RUNS):

        async def one_run(run: int = run) -> list[float]:
            pools.append(loop_pool())
            if calls == "sequential":
                results = [
                    await judge.request_json("grade", request_id=f"r{run}-{k}")
                    for k in range(CALLS_PER_RUN)
                ]
            else:
                results = await asyncio.gather(
                    *(
                        judge.request_json("grade", request_id=f"r{run}-{k}")
                        for k in range(CALLS_PER_RUN)
                    )
                )
            return [parsed["score"] for parsed, _ in results]

        before = len(threaded_server.requests)
        assert asyncio.run(one_run()) == [1] * CALLS_PER_RUN
        this_run = {r.connection for r in threaded_server.requests[before:]}
        assert not this_run & seen_connections, f"run {run} reused an earlier run's connection"
        seen_connections |= this_run
        assert pools[-1].closed  # the run's pool closed with its loop
        deadline = time.monotonic() + 60
        while _open_connections(threaded_server) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _open_connections(threaded_server) == 0, f"run {run} left connections open"
    assert all(pool.closed for pool in pools)
