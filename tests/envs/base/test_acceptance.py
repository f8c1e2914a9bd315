"""Large groups with injected faults, cancellation, and resource release."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.envs.base.support import HoldUntilAll, ToolEnv, make_request, open_sockets, tool_reply

from benchmax.envs.shared_types import RolloutFailure
from benchmax.testing import Fault, MockModelServer, RecordedRequest

GROUP_SIZE = 1000

# (fault, expected termination reason) for every third rollout, in rotation.
FAULTS: list[tuple[Fault | None, str]] = [
    (Fault.status(500, message="worker crashed"), "model_error"),
    (Fault.status(400, error_code="context_budget_exceeded"), "context_exceeded"),
    (Fault.no_choices(), "model_error"),
    (Fault.malformed(), "model_error"),
    (Fault.status(429, message="slow down"), "model_error"),
    (None, "sandbox_error"),  # the tool raises RolloutFailure
]


class GroupEnv(ToolEnv):
    max_turns = 2

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if rollout_id.endswith("-sandbox"):
            raise RolloutFailure("sandbox_error", "sandbox crashed")
        return {"value": tool_args["left"] * tool_args["right"]}


def answer_or_use_tool(body: dict[str, Any], record: RecordedRequest) -> Any:
    """Answer at once, except that sandbox rollouts first call the tool."""
    if record.session.endswith("-sandbox") and len(body["messages"]) == 1:
        return tool_reply(("multiply", {"left": 6, "right": 7}))
    return "42"


async def test_thousand_rollouts_with_a_third_faulted(mock_server: MockModelServer) -> None:
    mock_server.policy = answer_or_use_tool
    expected: dict[str, str] = {}
    requests = []
    for index in range(GROUP_SIZE):
        rollout_id = f"rollout-{index}"
        reason = "finished"
        if index % 3 == 0:
            fault, reason = FAULTS[(index // 3) % len(FAULTS)]
            if fault is None:
                rollout_id += "-sandbox"
            else:
                mock_server.inject(fault, session=rollout_id)
        expected[rollout_id] = reason
        requests.append(make_request(mock_server, rollout_id))

    env = GroupEnv()
    outcomes = await env.run_group(requests)  # its speed: benchmarks/model_http.py

    assert list(outcomes) == list(expected)
    assert {rid: o.termination_reason for rid, o in outcomes.items()} == expected
    for rollout_id, outcome in outcomes.items():
        value = 1.0 if expected[rollout_id] == "finished" else 0.0
        assert outcome.rewards == {"correct": value}
    assert sum(r == "finished" for r in expected.values()) == GROUP_SIZE - (GROUP_SIZE + 2) // 3
    others = asyncio.all_tasks() - {asyncio.current_task()}
    assert [
        t for t in others if t.get_coro().__qualname__ != "MockModelServer._serve_connection"
    ] == []
    await env.aclose()


def test_cancelling_run_group_cancels_every_rollout_and_leaks_nothing() -> None:
    async def scenario() -> tuple[int, int, int, int]:
        in_loop = open_sockets()
        released = 0
        hold = HoldUntilAll(20, release=False)

        class Tracked(GroupEnv):
            from contextlib import asynccontextmanager as _acm

            @_acm
            async def rollout_context(self, rollout_id: str, example: Any) -> Any:
                nonlocal released
                try:
                    yield
                finally:
                    released += 1

        async with MockModelServer(hold) as server:
            env = Tracked()
            group = asyncio.create_task(
                env.run_group([make_request(server, f"r{i}") for i in range(20)])
            )
            await asyncio.wait_for(hold.all_arrived.wait(), 60)
            group.cancel()
            try:
                await group
            except asyncio.CancelledError:
                pass
            pending = sum(t.get_name().startswith("benchmax-rollout-") for t in asyncio.all_tasks())
            await env.aclose()
        return in_loop, open_sockets(), released, pending

    in_loop, after, released, pending = asyncio.run(scenario())
    assert released == 20
    assert pending == 0
    assert after == in_loop
