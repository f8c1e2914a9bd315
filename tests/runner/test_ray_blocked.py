"""What a Ray worker's watch thread sees of a loop a group blocks, and when the driver looks
(no Ray needed: the same pieces on a loop in this process)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv

from benchmax.runner._ray_blocked import LoopHeartbeat, LoopState, check_after, group_context

ENTERED, RELEASED = threading.Event(), threading.Event()


def stuck_tool() -> None:
    """Blocks the loop (synchronously) until the watcher has looked."""
    ENTERED.set()
    RELEASED.wait(120)


async def observe_a_blocked_loop() -> tuple[LoopState, LoopState]:
    ENTERED.clear()
    RELEASED.clear()
    heartbeat = LoopHeartbeat()
    heartbeat.start()
    await asyncio.sleep(0.3)
    states: list[LoopState] = []

    def watch() -> None:  # what the worker's watch concurrency group does, from its thread
        ENTERED.wait(120)
        time.sleep(0.9)  # the loop has not beaten since before the tool started
        states.append(heartbeat.state())
        RELEASED.set()

    async def group() -> None:
        async def rollout() -> None:  # a task the group starts inherits its context
            await asyncio.sleep(0)
            stuck_tool()

        await asyncio.gather(rollout())

    healthy = heartbeat.state()
    watcher = threading.Thread(target=watch)
    watcher.start()
    await asyncio.create_task(group(), context=group_context(7))
    watcher.join()
    return healthy, states[0]


def test_the_heartbeat_names_the_group_and_the_function_blocking_the_loop() -> None:
    healthy, blocked = asyncio.run(observe_a_blocked_loop())
    assert healthy.blocked_seconds < 0.5 and healthy.example_index is None
    assert blocked.blocked_seconds >= 0.8
    assert blocked.example_index == 7
    assert blocked.hook is not None and blocked.hook.startswith(f"stuck_tool ({__file__}:")


@pytest.mark.parametrize(
    ("attributes", "on_env", "expected"),
    [
        ({}, {}, None),  # no rollout timeout: nothing is cut, as in a local run
        ({"rollout_timeout": 30}, {}, 30.0),
        ({"rollout_timeout": 30, "reward_timeout": 5}, {}, 35.0),
        ({}, {"rollout_timeout": 10.0, "reward_timeout": 2.5}, 12.5),
        ({"rollout_timeout": 4}, {"rollout_timeout": 10.0}, 4.0),  # the run's value first
        ({"rollout_timeout": None}, {"rollout_timeout": 10.0}, None),
    ],
)
def test_the_driver_looks_after_the_rollout_and_reward_timeouts(
    attributes: dict[str, Any], on_env: dict[str, Any], expected: float | None
) -> None:
    env = AnswerEnv()
    for name, value in on_env.items():
        setattr(env, name, value)
    assert check_after(attributes, env) == expected
