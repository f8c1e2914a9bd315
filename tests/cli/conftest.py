"""Fixtures for the CLI tests: an in-process runner, data files, a mock server in a thread."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tests.runner.sample_envs import write_answer_data

from benchmax.cli import cli
from benchmax.testing import MockModelServer, Policy, echo

REPO = Path(__file__).resolve().parents[2]
SAMPLE_ENVS = REPO / "tests" / "runner" / "sample_envs.py"


def interruptible() -> None:
    """``preexec_fn`` for a child a test stops with SIGINT: Ctrl-C's default action, even
    when the test process runs with SIGINT ignored (a background job of a non-interactive
    shell, as CI scripts and load harnesses start one; children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sample_envs_importable() -> None:
    """Let environment files written by a test ``from sample_envs import ...``."""
    sys.path.insert(0, str(SAMPLE_ENVS.parent))


@pytest.fixture(autouse=True)
def _restore_sys_path() -> Iterator[None]:
    """File targets put their directory on sys.path; undo that after each test."""
    saved = list(sys.path)
    yield
    sys.path[:] = saved


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Run ``benchmax ARGS...`` in-process; returns click's ``Result``."""

    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        return CliRunner().invoke(cli, [str(arg) for arg in args], env=env)

    return run


@pytest.fixture
def answer_data(tmp_path: Path) -> Path:
    """A data directory holding ``eval.jsonl`` with 6 question/answer rows."""
    directory = tmp_path / "data"
    directory.mkdir()
    write_answer_data(directory, count=6)
    return directory


class ThreadedServer:
    """A ``MockModelServer`` serving from its own event loop in a background thread."""

    def __init__(self, policy: Policy, model: str = "m", *, tokens: bool = False) -> None:
        self.server = MockModelServer(policy, model=model, tokens=tokens)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> MockModelServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(60)
        return self.server

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(60)
        self._loop.close()


@pytest.fixture
def threaded_server() -> Callable[[Policy], ThreadedServer]:
    """``with threaded_server(policy) as server:`` a mock server the CLI can reach; its
    ``/models`` lists one model, ``m`` unless ``model=`` says otherwise; ``tokens=True``
    serves in token mode."""
    return lambda policy=echo, model="m", tokens=False: ThreadedServer(policy, model, tokens=tokens)
