"""A group recorded by ``run``, ``collect_group`` and ``rescore`` is the same record."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv, write_answer_data

from benchmax._group_pipeline import Group, GroupPipeline, Placement, run_pool
from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseRollout, Example, JsonRow, RolloutRequest
from benchmax.results import read_results
from benchmax.runner import RunConfig, rescore_results, run_environment
from benchmax.testing import MockModelServer
from benchmax.training import collect_group
from benchmax.trajectory import Trajectory, annotate

logger = logging.getLogger("tests.group_pipeline")
KEY = "sk-pipeline-secret-1234"


class LoggingEnv(AnswerEnv):
    """AnswerEnv whose rollouts log (with the key in the text) and annotate."""

    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        logger.warning("sandbox opened with %s", KEY)
        yield

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        annotate("reply", rollout.messages[-1]["content"])
        return await super().compute_reward(rollout)


def normalised(trajectory: Trajectory) -> dict[str, Any]:
    """The record without what differs by construction: ids, place in a run, times."""
    data = dict(trajectory.to_json())
    for name in ("rollout_id", "run_id", "example_index", "timings"):
        data.pop(name, None)
    data["model_calls"] = [
        {k: v for k, v in call.items() if k != "seconds"} for call in data.get("model_calls", [])
    ]
    data["logs"] = [{k: v for k, v in log.items() if k != "time"} for log in data["logs"]]
    return data


async def test_run_collect_group_and_rescore_record_the_same_trajectories(
    mock_server: MockModelServer, tmp_path: Path
) -> None:
    write_answer_data(tmp_path, count=1)
    env = LoggingEnv()
    ran: list[tuple[Trajectory, ...]] = []
    config = RunConfig(
        model="m",
        base_url=mock_server.base_url,
        model_auth=StaticBearerAuth(KEY),
        base_dir=tmp_path,
        group_size=3,
        output=tmp_path / "run.jsonl",
    )
    await run_environment(env, config, on_group=ran.append)
    (example,) = list(await env.create_dataset("eval", tmp_path))
    requests = [
        RolloutRequest(
            rollout_id=f"collect.r{k}",
            example=example,
            model="m",
            base_url=mock_server.base_url,
            model_auth=StaticBearerAuth(KEY),
            split="eval",
        )
        for k in range(3)
    ]
    collected = await collect_group(env, requests)
    await rescore_results(
        env, tmp_path / "run.jsonl", tmp_path / "rescored.jsonl", base_dir=tmp_path
    )
    await env.aclose()
    rescored = read_results(tmp_path / "rescored.jsonl").rollouts
    (run_group,) = ran
    as_run = [normalised(t) for t in run_group]
    assert as_run == [normalised(t) for t in collected.trajectories]
    assert as_run == [normalised(t) for t in rescored]
    first = run_group[0]
    assert [log["message"] for log in first.logs] == ["sandbox opened with ***"]
    assert first.annotations == {"reply": "q0"} and first.rewards == {"correct": 1.0}
    assert [t.group_index for t in collected.trajectories] == [0, 1, 2]
    assert all(t.timings["group_seconds"] >= 0 for t in collected.trajectories)


async def test_a_failed_group_keeps_its_logs_for_the_caller(mock_server: MockModelServer) -> None:
    class Broken(LoggingEnv):
        async def compute_reward(self, rollout: BaseRollout) -> Any:
            return ["not", "a", "map"]  # a contract error: run_group raises

    env = Broken()
    example = Example(id="ex", payload={"prompt_messages": [{"role": "user", "content": "hi"}]})
    requests = tuple(
        RolloutRequest(
            rollout_id=f"g.r{k}",
            example=example,
            model="m",
            base_url=mock_server.base_url,
            model_auth=StaticBearerAuth(KEY),
        )
        for k in range(2)
    )
    pipeline = GroupPipeline(env)
    with pytest.raises((TypeError, ValueError)):
        await pipeline.run(Group(requests, Placement("r", 0)))
    await env.aclose()
    logs = pipeline.take_failed_logs([r.rollout_id for r in requests])
    messages = {log["message"] for log in logs}
    assert "sandbox opened with ***" in messages
    assert any(m.startswith("additional rollout contract error") for m in messages)
    assert pipeline.take_failed_logs([r.rollout_id for r in requests]) == []


async def test_run_pool_bounds_concurrency_and_stops_at_the_first_error() -> None:
    running, peak, started = 0, 0, []
    gate = asyncio.Event()

    async def work(item: int) -> None:
        nonlocal running, peak
        started.append(item)
        running += 1
        peak = max(peak, running)
        try:
            if item == 1:
                raise KeyError(item)
            await gate.wait() if item == 0 else None
        finally:
            running -= 1

    async def release() -> None:
        while len(started) < 2:
            await asyncio.sleep(0)
        gate.set()

    with pytest.raises(RuntimeError, match="item 1"):
        await asyncio.gather(
            run_pool(
                range(10),
                work,
                concurrency=2,
                on_error=lambda item, error: RuntimeError(f"item {item}: {error!r}"),
            ),
            release(),
        )
    assert peak == 2 and started == [0, 1]  # nothing started after the failure
    with pytest.raises(ValueError, match="concurrency"):
        await run_pool([1], work, concurrency=0)
