"""The blocked-loop warning names a hook, never frozen or generated code (a slow import)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from benchmax.runner._loop_watch import watching_the_loop

# Blocks the loop until the watcher has warned (at most ``limit`` s; 0.8 s where no warning
# is expected): a busy machine only makes the watcher later, never the test wrong.
_BLOCK = (
    "import time\n"
    "end = time.monotonic() + limit\n"
    "time.sleep(0.8)\n"
    "while not warned and time.monotonic() < end:\n"
    "    time.sleep(0.05)\n"
)


async def _run_blocking_code(filename: str, *, warns: bool = True) -> set[str]:
    """Block the loop in code compiled as ``filename``, called from asyncio (the standard
    library) as benchmax's own lazy imports are; the hooks warned about."""
    code = compile(_BLOCK, filename, "exec")
    loop = asyncio.get_running_loop()
    async with watching_the_loop(threshold=0.2) as warned:
        ran = loop.create_future()
        # Called by asyncio itself (no frame of this file on the stack), then the future.
        loop.call_soon(exec, code, {"warned": warned, "limit": 120.0 if warns else 0.0})
        loop.call_soon(ran.set_result, None)
        await ran
    return warned


async def test_a_hook_blocking_the_loop_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook_file = str(tmp_path / "my_hook.py")
    with caplog.at_level(logging.WARNING, logger="benchmax.runner"):
        warned = await _run_blocking_code(hook_file)
    assert len(warned) == 1
    assert hook_file in next(iter(warned))
    assert "the event loop has been blocked" in caplog.text
    assert "my_hook.py" in caplog.text


@pytest.mark.parametrize("filename", ["<frozen importlib._bootstrap>", "<string>"])
async def test_frozen_or_generated_code_is_not_blamed(
    filename: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="benchmax.runner"):
        warned = await _run_blocking_code(filename, warns=False)
    assert warned == set()
    assert "the event loop has been blocked" not in caplog.text


async def test_code_carried_by_value_is_blamed(caplog: pytest.LogCaptureFixture) -> None:
    # cloudpickle names the source of code it carries by value (bundles, Ray) <dynamic-code>.
    with caplog.at_level(logging.WARNING, logger="benchmax.runner"):
        warned = await _run_blocking_code("<dynamic-code>")
    assert len(warned) == 1 and "<dynamic-code>" in next(iter(warned))
