"""The cost of finding a program's processes by their marker (``BENCHMAX_ROLLOUT_PROCESS``).

Every ``AgentEnv`` rollout and every MCP stdio server close scans ``/proc`` once for
processes still carrying the program's marker (``benchmax._process_sessions``): one read
of each ``/proc/<pid>/environ``, plus ``/proc/<pid>/stat`` for those whose environment
cannot be read (kernel threads, exiting processes). Printed: the processes alive, then the
scan's CPU time (``time.process_time``: stable on a busy machine, where wall time is not)
and wall time per scan, with nothing marked (the usual case), and again with ``--sleepers``
idle processes of this user started beside it (more processes to read).

    uv run python benchmarks/process_sweep.py [--scans 200] [--sleepers 300]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

from benchmax._process_sessions import MARKER_VARIABLE, marked_processes


def _scan_cost(scans: int) -> tuple[float, float]:
    """CPU and wall milliseconds per scan (median of 5 rounds)."""
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(5):
        started, ticks = time.perf_counter(), time.process_time()
        for _ in range(scans):
            marked_processes(MARKER_VARIABLE, "0" * 32)
        cpu.append((time.process_time() - ticks) / scans * 1000)
        wall.append((time.perf_counter() - started) / scans * 1000)
    return sorted(cpu)[2], sorted(wall)[2]


def _alive() -> int:
    return sum(name.isdigit() for name in os.listdir("/proc"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scans", type=int, default=200)
    parser.add_argument("--sleepers", type=int, default=300)
    options = parser.parse_args()
    cpu, wall = _scan_cost(options.scans)
    print(f"{_alive()} processes: {cpu:.3f} ms CPU, {wall:.3f} ms wall per scan")
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(options.sleepers)]
    try:
        cpu, wall = _scan_cost(options.scans)
        print(f"{_alive()} processes: {cpu:.3f} ms CPU, {wall:.3f} ms wall per scan")
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


if __name__ == "__main__":
    main()
