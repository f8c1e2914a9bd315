"""A Ray run resumes locally and a local run resumes on Ray: one results file, groups atomic."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from tests.runner.sample_envs import NumberEnv, number_config

from benchmax.results import read_results
from benchmax.runner import RayExecutor, RunConfig, run_environment

pytestmark = pytest.mark.ray

EXAMPLES, GROUP_SIZE = 8, 3


def interrupt(path: Path, keep_lines: int) -> None:
    """Cut ``path`` as a hard kill would: the header, ``keep_lines`` lines, half a line."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: 1 + keep_lines]) + lines[1 + keep_lines][:20])


def outcomes(path: Path) -> dict[tuple[int, int], dict[str, float]]:
    return {(r.example_index, r.group_index): r.rewards for r in read_results(path).rollouts}


def ray_executor() -> RayExecutor:
    return RayExecutor(workers=2, worker_concurrency=2, constructor_args={"count": EXAMPLES})


async def reference(tmp_path: Path) -> dict[tuple[int, int], dict[str, float]]:
    config = number_config(tmp_path, group_size=GROUP_SIZE, output=tmp_path / "reference.jsonl")
    await run_environment(NumberEnv(EXAMPLES), config)
    return outcomes(tmp_path / "reference.jsonl")


def first_half_groups(path: Path) -> list[int]:
    """Example indexes of the first three complete groups in file order."""
    indexes = [json.loads(line)["example_index"] for line in path.read_text().splitlines()[1:]]
    return list(dict.fromkeys(indexes))[:3]


@pytest.mark.parametrize(("first", "second"), [("ray", "local"), ("local", "ray")])
async def test_a_run_resumes_under_the_other_executor(
    first: str, second: str, tmp_path: Path, ray_cluster: ModuleType
) -> None:
    expected = await reference(tmp_path)
    config: RunConfig = number_config(tmp_path, group_size=GROUP_SIZE)
    executors = {"ray": ray_executor, "local": lambda: None}
    await run_environment(NumberEnv(EXAMPLES), config, executor=executors[first]())
    kept = first_half_groups(config.output)
    interrupt(config.output, keep_lines=3 * GROUP_SIZE + 1)  # 3 groups and 1 line of the 4th
    report = await run_environment(NumberEnv(EXAMPLES), config, executor=executors[second]())
    assert report.groups_resumed == 3
    assert report.rollouts_run == (EXAMPLES - 3) * GROUP_SIZE
    assert report.groups == EXAMPLES
    assert outcomes(config.output) == expected
    records = read_results(config.output).rollouts
    attempts = {r.example_index: r.attempt for r in records}
    partial = [i for i in range(EXAMPLES) if i not in kept and attempts[i] == 2]
    assert len(partial) == 1  # the cut group ran again as attempt 2; the others as attempt 1
    assert all(attempts[i] == 1 for i in kept)
    runs = {r.run_id for r in records}
    assert len(runs) == 1  # one run, one file
