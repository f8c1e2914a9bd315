"""One real server per session (``pytest -m vllm`` / ``pytest -m llamacpp``).

A server whose environment is missing, or that cannot start, fails every test that needs
it under CI (``CI=true``: never a silent skip) and skips them locally with one line naming
the setup command. ``BENCHMAX_VLLM_URL`` / ``BENCHMAX_LLAMACPP_URL`` (a ``.../v1`` base URL)
point the tests at a server already running instead (started the same way: see
docs/servers.md); it is neither started nor stopped here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from tests.real_servers._servers import (
    MODEL,
    RunningServer,
    ServerSetupMissing,
    running_llamacpp,
    running_vllm,
)

_FAILED: dict[str, str] = {}


def _unavailable(message: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _server(
    name: str,
    url_variable: str,
    start: Callable[[], AbstractContextManager[RunningServer]],
    request: pytest.FixtureRequest,
) -> Iterator[RunningServer]:
    given = os.environ.get(url_variable)
    if given:
        base = given.rstrip("/")
        httpx.get(f"{base}/models", timeout=30).raise_for_status()
        yield RunningServer(base, base.removesuffix("/v1"), MODEL, Path(os.devnull), 0.0)
        return
    try:
        with start() as server:
            capture = request.config.pluginmanager.getplugin("capturemanager")
            with capture.global_and_fixture_disabled():
                print(f"\n{name} ready after {server.start_seconds:.0f} s (log: {server.log})")
            yield server
    except ServerSetupMissing as missing:
        _unavailable(str(missing))
    except RuntimeError as failed:  # could not start: the log's tail says why
        _unavailable(f"{name} could not start: {failed}")


@pytest.fixture(scope="session")
def vllm(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    """vLLM (CPU build) serving SmolLM2-135M-Instruct on 127.0.0.1 for the session."""
    yield from _server("vLLM", "BENCHMAX_VLLM_URL", running_vllm, request)


@pytest.fixture(scope="session")
def llamacpp(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    """llama-cpp-python's server serving the SmolLM2 GGUF file on 127.0.0.1."""
    yield from _server("llama-cpp-python", "BENCHMAX_LLAMACPP_URL", running_llamacpp, request)
