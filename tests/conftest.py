"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import asyncio
import gc
import os
import secrets
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from hypothesis import HealthCheck, settings

from benchmax.testing import MockModelServer, Policy, echo

# No property test depends on the machine's speed: no per-example deadline (Hypothesis's
# 200 ms default fails examples a busy machine runs slowly) and no health check of how fast
# inputs are generated. Property tests explore new random inputs on developers' machines;
# CI (CI=true) replays a fixed derandomized sequence so a result does not depend on the draw.
settings.register_profile("benchmax", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("benchmax"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "benchmax")


class LoopClock:
    """The running event loop's clock, which a test moves forward.

    Every deadline benchmax sets (``model_timeout``, ``tool_timeout``, ``rollout_timeout``,
    ``reward_timeout``, retries' waits) is an ``asyncio`` timer on the loop's clock, so
    :meth:`advance` makes them fire exactly when the test says, never because the machine
    is busy: a test keeps its deadlines generous (>= 30 s) for the calls that must finish,
    waits for an event telling it the call that must time out is under way, and advances
    past the deadline. Only this test's loop is affected; real time goes on as usual.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._real = loop.time
        self.offset = 0.0
        loop.time = self._time  # type: ignore[method-assign]

    def _time(self) -> float:
        return self._real() + self.offset

    async def advance(self, seconds: float) -> None:
        """Move the loop's clock ``seconds`` ahead, then let due timers run."""
        self.offset += seconds
        for _ in range(3):
            await asyncio.sleep(0)

    def restore(self) -> None:
        del self._loop.time  # back to the class's method


@pytest.fixture
async def loop_clock() -> AsyncIterator[LoopClock]:
    """The test loop's clock; ``await loop_clock.advance(31)`` makes 31 s of deadlines pass."""
    clock = LoopClock(asyncio.get_running_loop())
    try:
        yield clock
    finally:
        clock.restore()


@pytest.fixture
async def mock_server() -> AsyncIterator[MockModelServer]:
    """A started ``MockModelServer`` answering with ``echo``.

    Swap the policy with ``mock_server.policy = scripted([...])``; queue faults with
    ``mock_server.inject(...)``. Stopped (every connection closed) after the test.
    """
    async with MockModelServer(echo) as server:
        yield server


@pytest.fixture
async def make_mock_server() -> AsyncIterator[Callable[..., Awaitable[MockModelServer]]]:
    """Factory for extra started servers: ``server = await make_mock_server(policy)``.

    Keyword arguments go to ``MockModelServer``; every server is stopped after the test.
    """
    servers: list[MockModelServer] = []

    async def make(policy: Policy = echo, **options: object) -> MockModelServer:
        server = MockModelServer(policy, **options)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield make
    for server in reversed(servers):
        await server.stop()


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """A plain ``httpx.AsyncClient`` for http:// URLs (no TLS setup, so it is cheap)."""
    async with httpx.AsyncClient(verify=False, timeout=60) as client:
        yield client


async def _raw_exchange(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
def raw_http() -> Callable[[int, bytes], Awaitable[bytes]]:
    """``await raw_http(port, payload)``: send raw bytes to ``127.0.0.1:port`` and return
    everything the server sends until it closes the connection (60 s at most)."""
    return _raw_exchange


def _open_fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def _other_tasks() -> set[asyncio.Task[object]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


@pytest.fixture
async def assert_released() -> Callable[[], None]:
    """Snapshot open file descriptors and asyncio tasks at test start; calling the
    fixture's value later asserts both are back to that snapshot (nothing leaked)."""
    fds, tasks = _open_fds(), _other_tasks()

    def check() -> None:
        assert _open_fds() == fds
        assert _other_tasks() == tasks

    return check


@dataclass(frozen=True)
class ProcessTag:
    """An environment variable (``BENCHMAX_TEST_TAG=<random>``) a test gives the processes
    it starts: every process that inherits it, whatever session or name it took, is found
    by ``alive()`` (a scan of ``/proc/*/environ`` of the test's own, not benchmax's)."""

    value: str

    @property
    def environment(self) -> dict[str, str]:
        return {"BENCHMAX_TEST_TAG": self.value}

    def alive(self) -> list[int]:
        """The live (non-zombie) processes carrying the tag."""
        entry = f"BENCHMAX_TEST_TAG={self.value}".encode()
        found: list[int] = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    if entry not in environ.read().split(b"\0"):
                        continue
                with open(f"/proc/{name}/stat", "rb") as stat:
                    if stat.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X"):
                        continue
            except OSError:
                continue
            found.append(int(name))
        return found


@pytest.fixture
def process_tag() -> Iterator[ProcessTag]:
    """A fresh ``ProcessTag``; whatever still carries it when the test ends is killed (a
    failing test leaves no process behind)."""
    tag = ProcessTag(secrets.token_hex(8))
    yield tag
    for _ in range(1000):
        left = tag.alive()
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
