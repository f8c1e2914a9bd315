"""The guard that ends a local Ray instance's processes when its driver is killed, tried on
a stand-in driver whose "Ray" is a shell with a child of its own (no Ray needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

DRIVER = textwrap.dedent(
    """
    import subprocess, sys, time
    from benchmax.runner._ray_reaper import reaping_local_ray

    before = subprocess.Popen(["sleep", "300"])  # not started inside the block: never reaped
    with reaping_local_ray():
        child = subprocess.Popen(
            ["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, text=True
        )
        grandchild = int(child.stdout.readline())
        print(before.pid, child.pid, grandchild, flush=True)
        if sys.argv[1] == "inside":
            time.sleep(300)
    print("left", flush=True)
    time.sleep(300)
    """
)


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"  # a zombie has ended


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids the test must end if they still run when it finishes."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def start_driver(where: str, started: list[int]) -> tuple[subprocess.Popen[str], list[int]]:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, where], stdout=subprocess.PIPE, text=True
    )
    assert driver.stdout is not None
    pids = [int(p) for p in driver.stdout.readline().split()]
    started.extend([driver.pid, *pids])
    return driver, pids


def test_the_processes_a_killed_driver_started_in_the_block_end(started: list[int]) -> None:
    driver, (before, child, grandchild) = start_driver("inside", started)
    # The guard records the driver's new processes once a second: six chances to have
    # seen them, however busy the machine (the guard gives no sign of it).
    time.sleep(6)
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 60
    while (running(child) or running(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(child) and not running(grandchild)  # the grandchild was orphaned
    assert running(before)


def test_nothing_is_ended_after_the_block_was_left(started: list[int]) -> None:
    driver, (_before, child, grandchild) = start_driver("outside", started)
    assert driver.stdout is not None
    assert driver.stdout.readline() == "left\n"
    driver.kill()
    driver.wait()
    time.sleep(2.0)
    assert running(child) and running(grandchild)
