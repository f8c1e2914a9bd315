"""``dump_bundle`` latency for a typical two-module environment project.

Writes a throwaway src-layout project (``pyproject.toml``, ``bench_pkg/env.py`` with a
``BaseEnv`` subclass and ``bench_pkg/scoring.py`` used as a module object, plus a
``.dist-info`` so it looks installed) to a temporary directory, puts it on ``sys.path``,
and times complete ``dump_bundle`` calls: both modules are auto-captured by value (two
capture rounds, three pickle replays), then the remaining-reference, sibling-source and
delayed-import checks run. Also reports ``save_bundle`` + ``read_bundle`` of the result.

    uv run python benchmarks/dump_bundle.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import importlib
import logging
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from benchmax.bundle import bundle_digest, dump_bundle, read_bundle, save_bundle

SCORING = """
import re

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract(text):
    match = ANSWER.search(text or "")
    return match.group(1).strip() if match else None


def score(text, expected):
    return 1.0 if extract(text) == expected else 0.0
"""

ENV = '''
from benchmax.envs.base.env import BaseEnv
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example

from bench_pkg import scoring


class BenchEnv(BaseEnv):
    """Answers arithmetic questions; one tool."""

    reward_keys = ("correct",)
    max_turns = 4

    def __init__(self, *, questions=None, **limits):
        super().__init__(**limits)
        self.questions = questions or [("2+2", "4")]

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [
            Example(
                id=f"q{index}",
                payload={
                    "prompt_messages": [{"role": "user", "content": question}],
                    "answer": answer,
                },
            )
            for index, (question, answer) in enumerate(self.questions)
        ]
        return Dataset(rows[:max_examples])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "add", "parameters": {}}}]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        return str(sum(tool_args.values()))

    async def compute_reward(self, rollout):
        reply = rollout.messages[-1].get("content")
        return {"correct": scoring.score(reply, rollout.example_args["answer"])}
'''


def write_project(base: Path) -> Path:
    """Create the benchmark project and return its import directory."""
    (base / "pyproject.toml").write_text('[project]\nname = "bench-pkg"\nversion = "1.0.0"\n')
    package = base / "src" / "bench_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "scoring.py").write_text(textwrap.dedent(SCORING))
    (package / "env.py").write_text(textwrap.dedent(ENV))
    info = base / "src" / "bench_pkg-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-pkg\nVersion: 1.0.0\n")
    (info / "top_level.txt").write_text("bench_pkg\n")
    return base / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    options = parser.parse_args()
    logging.getLogger("benchmax.bundle").setLevel(logging.ERROR)  # no per-call warnings

    with tempfile.TemporaryDirectory() as directory:
        sys.path.insert(0, str(write_project(Path(directory))))
        env_class = importlib.import_module("bench_pkg.env").BenchEnv
        args = {"questions": [("2+2", "4"), ("3*3", "9")]}
        pip = ["httpx>=0.28,<1"]

        started = time.perf_counter()
        first = dump_bundle(env_class, constructor_args=args, pip_dependencies=pip)
        cold_ms = (time.perf_counter() - started) * 1000

        timings = []
        for _ in range(options.repeat):
            started = time.perf_counter()
            bundle = dump_bundle(env_class, constructor_args=args, pip_dependencies=pip)
            timings.append((time.perf_counter() - started) * 1000)
            assert bundle == first

        path = Path(directory) / "bench.bundle"
        started = time.perf_counter()
        save_bundle(first, path)
        assert bundle_digest(read_bundle(path)) == bundle_digest(first)
        file_ms = (time.perf_counter() - started) * 1000

    print(f"pickle size: {len(first.pickled)} bytes")
    print(f"dump_bundle first call: {cold_ms:.1f} ms")
    print(
        f"dump_bundle warm (n={options.repeat}): median {statistics.median(timings):.2f} ms, "
        f"min {min(timings):.2f} ms, max {max(timings):.2f} ms"
    )
    print(f"save_bundle + read_bundle: {file_ms:.2f} ms")


if __name__ == "__main__":
    main()
