"""Peak memory and wall time of the results readers on a 200,000-rollout file.

Generates a results file (groups of 4, about 1.3 KB a rollout, one 200 KB rollout as
the largest record) in a temporary directory, then runs each reader in its own process
and reports its peak RSS (``ru_maxrss`` of the child) and wall time, beside the RSS of a
process that only imports the CLI (the floor).

    uv run python benchmarks/stream_readers.py [--rollouts 200000]
        [--baseline-src DIR] [--commands show5,reason,trajectories,compare]

``--baseline-src DIR`` also runs every command with ``DIR`` (a ``src`` directory, e.g.
``git archive`` of the commit before streaming) first on ``PYTHONPATH``: before/after.
``--json PATH`` adds the figures to a results file (benchmarks/_results.py), from which
benchmarks/render_performance.py renders docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import record, table

GROUP_SIZE = 4
BIG_RECORD_CHARACTERS = 200_000

_CLI = "import sys; from benchmax.cli import main; sys.argv[0] = 'benchmax'; main()"
_TRAJECTORIES = (
    "import sys; from benchmax.training import read_trajectories; "
    "print(sum(1 for _ in read_trajectories(sys.argv[1])))"
)


def _commands(results: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "floor": [py, "-c", "import benchmax.cli"],
        "show5": [py, "-c", _CLI, "show", str(results), "--limit", "5"],
        "reason": [py, "-c", _CLI, "show", str(results), "--reason", "max_turns", "--limit", "5"],
        "trajectories": [py, "-c", _TRAJECTORIES, str(results)],
        "compare": [py, "-c", _CLI, "compare", str(results), str(results)],
        "view": [py, "-c", _CLI, "view", str(results), "-o", str(results.with_suffix(".html"))],
    }


def generate(path: Path, rollouts: int) -> int:
    """Write a results file of ``rollouts`` rollouts; returns the largest line's bytes."""
    header = {
        "type": "header",
        "format": "benchmax.results/1",
        "run_id": "20260101T000000-bench0",
        "created_at": "2026-01-01T00:00:00+00:00",
        "benchmax_version": "0",
        "definition": {"env": {"class": "bench:Env"}, "group_size": GROUP_SIZE, "split": "test"},
    }
    prompt = "Solve the problem and answer with one number. " * 4
    reply = "Let me think step by step about the problem. " * 12 + "The answer is 42."
    largest = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for n in range(rollouts):
            index, k = divmod(n, GROUP_SIZE)
            content = "x" * BIG_RECORD_CHARACTERS if n == rollouts // 2 else reply
            record = {
                "rollout_id": f"r-{index}-{k}",
                "run_id": "20260101T000000-bench0",
                "example_id": f"ex-{index:07d}",
                "split": "test",
                "example_index": index,
                "group_index": k,
                "attempt": 1,
                "termination_reason": "max_turns" if n % 97 == 0 else "finished",
                "rewards": {"correct": float(k % 2), "format": 1.0},
                "messages": [
                    {"role": "user", "content": f"{prompt} #{index}"},
                    {"role": "assistant", "content": content},
                ],
                "timings": {"group_seconds": 0.5, "model_seconds": 0.4},
                "usage": {"prompt_tokens": 60, "completion_tokens": 120},
            }
            line = json.dumps(record) + "\n"
            largest = max(largest, len(line))
            out.write(line)
    return largest


def measure(command: list[str], src: str | None) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, exit status) of ``command`` in a child process."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "120"
    start = time.perf_counter()
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        print(f"  ({' '.join(command[3:5])} failed: {errors.strip()[-200:]})")
    return usage.ru_maxrss / 1024, seconds, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=200_000)
    parser.add_argument("--baseline-src", metavar="DIR", help="src directory to compare with")
    parser.add_argument(
        "--commands",
        default="show5,reason,trajectories,compare",
        help="comma-separated: show5, reason, trajectories, compare, view",
    )
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="add the figures to this results file"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "results.jsonl"
        started = time.perf_counter()
        largest = generate(results, args.rollouts)
        size = results.stat().st_size
        print(
            f"{args.rollouts:,} rollouts, {size / 2**20:.0f} MB, largest record "
            f"{largest / 2**20:.2f} MB (generated in {time.perf_counter() - started:.1f} s)"
        )
        commands = _commands(results)
        wanted = ["floor", *[name for name in args.commands.split(",") if name]]
        sources: list[tuple[str, str | None]] = [("after", None)]
        if args.baseline_src:
            sources.insert(0, ("before", str(Path(args.baseline_src).resolve())))
        print(
            f"{'command':<14}"
            + "".join(f"{label + ' MB':>12}{label + ' s':>10}" for label, _ in sources)
        )
        rows: list[list[object]] = []
        for name in wanted:
            cells = []
            row: list[object] = [f"`{name}`"]
            for _label, src in sources:
                rss, seconds, status = measure(commands[name], src)
                cells.append(f"{rss:>12.0f}{seconds:>10.2f}")
                row += [round(rss), round(seconds, 2)] if status == 0 else ["failed", "failed"]
            print(f"{name:<14}" + "".join(cells), flush=True)
            rows.append(row)
    if args.json is not None:
        columns = ["command"]
        for label, _src in sources:
            columns += [f"{label}: peak RSS (MB)", f"{label}: wall (s)"]
        record(
            args.json,
            title="Streaming results readers",
            about=ABOUT,
            tables=[
                table(
                    columns,
                    rows,
                    caption=f"A results file of {args.rollouts:,} rollouts ({size / 2**20:.0f} "
                    f"MB, largest record {largest / 2**20:.2f} MB); `floor` only imports the CLI:",
                )
            ],
        )


ABOUT = (
    "Peak memory (`ru_maxrss` of the child) and wall time of each results reader, in its own "
    "process, on a generated results file (groups of 4, about 1.3 KB a rollout, one 200 KB "
    "rollout as the largest record), beside a process that only imports the CLI "
    "(docs/results-streaming.md)."
)


if __name__ == "__main__":
    main()
