"""A `benchmax run --ray` driver killed with SIGKILL takes the local Ray instance it started
along: no Ray process it started (raylet, GCS, agents, workers) stays behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.cli.conftest import REPO, SAMPLE_ENVS
from tests.runner.sample_envs import write_answer_data

pytestmark = pytest.mark.ray

POLICY = REPO / "tests" / "cli" / "paced_policy.py"


def processes() -> dict[int, tuple[int, int, str]]:
    """Every live process: ``{pid: (parent pid, start time, command line)}``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[1]), int(fields[19]), title)
    return found


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """The processes below ``root``: ``{pid: (start time, command line)}``."""
    table = processes()
    below: dict[int, tuple[int, str]] = {}
    stack = [root]
    while stack:
        parent = stack.pop()
        for pid, (ppid, started, title) in table.items():
            if ppid == parent and pid not in below:
                below[pid] = (started, title)
                stack.append(pid)
    return below


def alive(seen: dict[int, tuple[int, str]]) -> dict[int, str]:
    """Those of ``seen`` still running (the same process: same pid and start time)."""
    table = processes()
    return {
        pid: title
        for pid, (started, title) in seen.items()
        if table.get(pid, (0, -1))[1] == started
    }


RAY_DID_NOT_START = "The current node timed out during startup"
"""Ray's own message when its agents start too slowly (a busy machine): tried again."""


def started_run(
    arguments: list[str], log: Path, seen: dict[int, tuple[int, str]]
) -> subprocess.Popen[bytes] | None:
    """The driver once a group is saved and Ray's agents run (its processes added to
    ``seen``); ``None`` when Ray itself did not start."""
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    with log.open("wb") as sink:
        driver = subprocess.Popen(
            [sys.executable, "-m", "benchmax.cli", *arguments],
            cwd=REPO,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    output = Path(arguments[arguments.index("-o") + 1])
    deadline = time.monotonic() + 240  # the local Ray instance starts first
    while True:
        if driver.poll() is not None:
            if RAY_DID_NOT_START in log.read_text(errors="replace"):
                return None
            pytest.fail(log.read_text(errors="replace"))
        assert time.monotonic() < deadline, "the Ray run made no progress"
        seen.update(descendants(driver.pid))
        titles = " ".join(title for _, title in seen.values())
        lines = output.read_text().splitlines() if output.exists() else []
        if len(lines) > 1 and "DashboardAgent" in titles and "RuntimeEnvAgent" in titles:
            assert json.loads(lines[1])["termination_reason"] == "finished"
            seen.update(descendants(driver.pid))
            return driver
        time.sleep(0.2)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_killed_driver_leaves_no_ray_process_behind(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_answer_data(data, count=40)
    output = tmp_path / "run.jsonl"
    arguments = [
        "run", f"{SAMPLE_ENVS}:AnswerEnv", "--data", str(data), "-k", "2",
        "--mock-policy", f"{POLICY}:paced", "-o", str(output), "--force",
        "--ray", "--ray-workers", "1", "--ray-worker-concurrency", "1",
    ]  # fmt: skip
    seen: dict[int, tuple[int, str]] = {}
    driver = None
    try:
        for _attempt in range(3):
            driver = started_run(arguments, tmp_path / "driver.log", seen)
            if driver is not None:
                break
        assert driver is not None, "Ray did not start three times"
        assert "ray::_GroupWorker" in " ".join(title for _, title in seen.values())
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 30
        while alive(seen) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert alive(seen) == {}
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in alive(seen):  # only processes this test's driver started
            os.kill(pid, signal.SIGKILL)
