"""``benchmax show`` on a results file whose group holds one 30 MB message.

Writes the file (the same generator as the view tests), then times ``benchmax show FILE`` in
a subprocess with its output going to a file (a terminal only makes it slower): wall seconds
and bytes printed, best of ``--repeats``. ``--full`` adds the option that prints every
character.

    uv run python benchmarks/show_large_message.py [--megabytes 30] [--repeats 3] [--full]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.view.synthetic import header, rollout, write  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--timeout", type=float, default=600.0)
    options = parser.parse_args()
    huge = "y" * (options.megabytes * 1_000_000)
    size = f"{options.megabytes} MB"
    with tempfile.TemporaryDirectory() as directory:
        records = [
            rollout(0, "big", k, rewards={"correct": float(k)},
                    transcript=[{"role": "user", "content": "q"},
                                {"role": "assistant", "content": huge if k == 0 else "small"}])
            for k in range(2)
        ]  # fmt: skip
        big = write(Path(directory) / "big.jsonl", header(group_size=2), records)
        small = write(
            Path(directory) / "small.jsonl",
            header(group_size=2),
            [{**r, "transcript": r["transcript"][:1]} for r in records],
        )
        for label, results in (("a small file (start-up)", small), (f"one {size} message", big)):
            command = [sys.executable, "-m", "benchmax.cli", "show", str(results)]
            command += ["--full"] if options.full else []
            timed = _best(command, Path(directory) / "out.txt", options.repeats, options.timeout)
            if timed is None:
                print(f"show, {label}: did not finish within {options.timeout:g} s")
                continue
            seconds, printed = timed
            print(f"show, {label}{' (--full)' if options.full else ''}: {seconds:.2f} s "
                  f"(best of {options.repeats}), {printed:,} bytes printed")  # fmt: skip


def _best(command: list[str], out: Path, repeats: int, timeout: float) -> tuple[float, int] | None:
    """Best wall seconds of ``repeats`` runs and the bytes printed; ``None`` on a timeout."""
    best = float("inf")
    for _ in range(repeats):
        with out.open("w") as sink:
            started = time.perf_counter()
            try:
                subprocess.run(command, stdout=sink, check=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
            best = min(best, time.perf_counter() - started)
    return best, out.stat().st_size


if __name__ == "__main__":
    main()
