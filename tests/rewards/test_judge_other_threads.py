"""Issue 38 item 12: a judge run from another event loop (another thread) under the runner.

A reward hook may move its judge work to another thread's event loop: a thread pool
running ``asyncio.run``, a dedicated judge loop fed by ``run_coroutine_threadsafe``, a
plain thread. Context variables do not follow work into a thread pool or a new thread,
so the runner's default judge deadline (bound in a context variable) was lost there and
a ``Judge(timeout=None)`` waited forever on a stalled server. These tests stall a real
server and require every such judge call to settle with ``judge_error`` under the
runner's deadline; each is bounded (it fails instead of hanging).

The stress test runs many rounds of concurrent judge calls from several loops at once
under a small concurrency cap, against a keep-alive server that outlives the loops, and
checks each round finishes (no call stuck behind a cap, a closed pool or a connection of
another loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import gc
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv

from benchmax._hook_deadlines import bound_hook_deadlines, with_hook_deadlines
from benchmax._modelhttp import PoolLease
from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseRollout, Example, RolloutRequest
from benchmax.rewards import Judge
from benchmax.runner import HookDeadlines
from benchmax.testing import MockModelServer
from benchmax.training import collect_group

SMALL = 0.2
"""The runner's judge deadline in these tests (seconds)."""

BOUND = 60.0
"""What a test waits at most before it fails instead of hanging (seconds)."""

type JudgeCall = Coroutine[Any, Any, tuple[dict[str, object], str]]


def in_new_thread[T](make: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Future[T]:
    """``asyncio.run(make())`` in a new daemon thread (the coroutine made there)."""
    result: concurrent.futures.Future[T] = concurrent.futures.Future()

    def work() -> None:
        try:
            result.set_result(asyncio.run(make()))
        except BaseException as error:
            result.set_exception(error)

    threading.Thread(target=work, daemon=True).start()
    return asyncio.wrap_future(result)


class OtherLoopJudgedEnv(AnswerEnv):
    """Its reward asks a judge on another thread's event loop, as ``how`` says."""

    def __init__(self, judge: Judge, how: str, judge_loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.judge = judge
        self.how = how
        self.judge_loop = judge_loop

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        def ask() -> JudgeCall:
            return self.judge.request_json("grade it", request_id=rollout.rollout_id)

        loop = asyncio.get_running_loop()
        if self.how == "executor":  # the default thread pool, asyncio.run there
            await loop.run_in_executor(None, asyncio.run, ask())
        elif self.how == "new thread":
            await in_new_thread(ask)
        else:  # a long-lived judge loop in its own thread
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(ask(), self.judge_loop))
        return {"correct": 1.0}


@dataclasses.dataclass
class StalledServer:
    url: str
    connections: list[asyncio.StreamWriter]


@asynccontextmanager
async def stalled_server() -> AsyncIterator[StalledServer]:
    """A server on 127.0.0.1 that accepts connections and never answers; closing it
    ends the calls still waiting on it."""
    connections: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await asyncio.Event().wait()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield StalledServer(f"http://127.0.0.1:{port}/v1", connections)
    finally:
        for writer in connections:
            writer.close()
        server.close()


@pytest.fixture
def judge_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread for the test; shut down as
    ``asyncio.run`` does (which closes its model connection pool)."""
    loop = asyncio.new_event_loop()

    def run() -> None:
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(BOUND)


def group(server: MockModelServer, count: int = 2) -> list[RolloutRequest[Any]]:
    payload = {"prompt_messages": [{"role": "user", "content": "q0"}], "answer": "q0"}
    example = Example(id="ex", payload=payload)
    return [
        RolloutRequest(
            rollout_id=f"judged.r{k}",
            example=example,
            model="m",
            base_url=server.session_url(f"judged.r{k}"),
            model_auth=StaticBearerAuth("sk-policy"),
        )
        for k in range(count)
    ]


@pytest.mark.parametrize("how", ["executor", "new thread", "judge loop"])
async def test_a_judge_on_another_threads_loop_keeps_the_runners_deadline(
    mock_server: MockModelServer, judge_loop: asyncio.AbstractEventLoop, how: str
) -> None:
    deadlines = dataclasses.replace(HookDeadlines.none(), judge=SMALL)
    async with stalled_server() as server:
        judge = Judge(model="j", base_url=server.url, auth=StaticBearerAuth("sk"), timeout=None)
        env = OtherLoopJudgedEnv(judge, how, judge_loop)
        try:
            async with asyncio.timeout(BOUND):  # a lost deadline fails here, not hangs
                collected = await collect_group(env, group(mock_server), hook_deadlines=deadlines)
        finally:
            await env.aclose()
    for trajectory in collected.trajectories:
        assert trajectory.termination_reason == "judge_error", trajectory.logs
        assert any(
            f"judge request did not answer within the runner's default deadline of {SMALL:g}s"
            in log["message"]
            for log in trajectory.logs
        ), trajectory.logs


async def test_a_reward_cut_short_frees_its_judge_slot_on_the_other_loop(
    mock_server: MockModelServer, judge_loop: asyncio.AbstractEventLoop
) -> None:
    """The reward's own deadline cancels the judge call it left waiting on the judge loop
    (cap 1): the call's slot comes back, so the next call on that loop reaches the server
    instead of waiting forever behind a slot nobody holds."""
    deadlines = dataclasses.replace(HookDeadlines.none(), compute_reward=SMALL)
    async with stalled_server() as server:
        judge = Judge(
            model="j",
            base_url=server.url,
            auth=StaticBearerAuth("sk"),
            timeout=None,
            max_retries=0,
            max_concurrent_requests=1,
        )
        env = OtherLoopJudgedEnv(judge, "judge loop", judge_loop)
        try:
            async with asyncio.timeout(BOUND):
                collected = await collect_group(env, group(mock_server), hook_deadlines=deadlines)
        finally:
            await env.aclose()
        assert [t.termination_reason for t in collected.trajectories] == ["reward_timeout"] * 2
        seen = len(server.connections)
        after = asyncio.run_coroutine_threadsafe(
            judge.request_json("grade it", request_id="after"), judge_loop
        )
        try:
            async with asyncio.timeout(BOUND):  # a leaked slot: it never gets there
                while len(server.connections) == seen:
                    await asyncio.sleep(0.01)
        finally:
            after.cancel()


def test_other_threads_get_the_loosest_deadlines_of_the_running_pipelines() -> None:
    """Outside any binding, code sees no deadline while nothing is bound anywhere, the
    loosest of every binding in force (per kind) while some are, and a binding of its
    own always wins."""

    def seen_elsewhere() -> HookDeadlines | None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(bound_hook_deadlines).result(BOUND)

    gc.collect()  # a pipeline coroutine an earlier test dropped unfinished ends its binding
    assert seen_elsewhere() is None
    tight = HookDeadlines(judge=1.0, tools=5.0, user_turn=None)
    loose = HookDeadlines(judge=3.0, tools=2.0)
    with with_hook_deadlines(tight):
        assert seen_elsewhere() == tight
        with with_hook_deadlines(loose):
            assert bound_hook_deadlines() == loose  # its own binding
            elsewhere = seen_elsewhere()
            assert elsewhere is not None
            assert (elsewhere.judge, elsewhere.tools, elsewhere.user_turn) == (3.0, 5.0, None)
        with with_hook_deadlines(None):  # a pipeline that sets no deadlines
            assert bound_hook_deadlines() is None
            assert seen_elsewhere() == HookDeadlines.none()
        assert seen_elsewhere() == tight
    assert seen_elsewhere() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_forgets_the_other_threads_bindings() -> None:
    """A child forked inside a binding keeps it in its own context; the bindings in force
    are forgotten there (their threads did not follow), and binding again works."""
    read_end, write_end = os.pipe()
    with with_hook_deadlines(HookDeadlines(judge=7.0)):
        pid = os.fork()
        if pid == 0:  # the child: report, then leave without pytest's teardown
            try:
                own = bound_hook_deadlines()
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    elsewhere = pool.submit(bound_hook_deadlines).result(BOUND)
                    with with_hook_deadlines(HookDeadlines(judge=9.0)):
                        again = pool.submit(bound_hook_deadlines).result(BOUND)
                said = f"{own and own.judge} {elsewhere} {again and again.judge}"
                os.write(write_end, said.encode())
            finally:
                os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    said = os.read(read_end, 1000).decode()
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    assert said == "7.0 None 9.0"


ROUNDS = 40
LOOPS = 4
CALLS_PER_LOOP = 6
CAP = 2
ROUND_BOUND = 60.0


@pytest.fixture
def threaded_server() -> Iterator[MockModelServer]:
    """A keep-alive MockModelServer on its own loop in a thread, outliving every loop
    that calls it."""
    server = MockModelServer(lambda body: '{"score": 1}')
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(BOUND)
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(BOUND)


def test_concurrent_judges_on_many_loops_never_hang(
    threaded_server: MockModelServer, judge_loop: asyncio.AbstractEventLoop
) -> None:
    """Many rounds; in each, several loops (each in its own thread, one of them holding and
    releasing a pool lease mid-round) make concurrent calls of one judge value under a cap
    of 2, half on their own loop and half on a shared judge loop. Every round must finish
    within ``ROUND_BOUND`` with every verdict (a hang fails the round)."""
    judge = Judge(
        "judge",
        threaded_server.base_url,
        StaticBearerAuth("sk-judge"),
        timeout=None,
        max_retries=0,
        max_concurrent_requests=CAP,
    )

    async def one_loop(round_: int, index: int) -> list[object]:
        lease = PoolLease()
        lease.hold()

        async def call(k: int) -> object:
            ask = judge.request_json("grade", request_id=f"r{round_}-{index}-{k}")
            if k % 2:
                shared = asyncio.run_coroutine_threadsafe(ask, judge_loop)
                parsed, _ = await asyncio.wrap_future(shared)
            else:
                parsed, _ = await ask
            return parsed["score"]

        calls = [asyncio.ensure_future(call(k)) for k in range(CALLS_PER_LOOP)]
        await asyncio.sleep(0)
        if index == 0:
            await lease.aclose()  # the pool closes once the calls over it end
        results = await asyncio.gather(*calls)
        await lease.aclose()
        return results

    deadlines = HookDeadlines(judge=ROUND_BOUND)
    for round_ in range(ROUNDS):
        # In force while the round runs: the loops' threads see it (a stuck call then
        # fails with its judge_error rather than only the round timing out).
        with with_hook_deadlines(deadlines):
            futures = [in_thread_future(one_loop, round_, index) for index in range(LOOPS)]
            done, stuck = concurrent.futures.wait(futures, timeout=ROUND_BOUND * 2)
        assert not stuck, f"round {round_}: {len(stuck)} loop(s) still waiting on the judge"
        for future in done:
            assert future.result() == [1] * CALLS_PER_LOOP, f"round {round_}"


def in_thread_future(
    make: Callable[[int, int], Coroutine[Any, Any, list[object]]], round_: int, index: int
) -> concurrent.futures.Future[list[object]]:
    result: concurrent.futures.Future[list[object]] = concurrent.futures.Future()

    def work() -> None:
        try:
            result.set_result(asyncio.run(make(round_, index)))
        except BaseException as error:
            result.set_exception(error)

    threading.Thread(target=work, daemon=True).start()
    return result
