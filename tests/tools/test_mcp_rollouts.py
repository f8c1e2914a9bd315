"""MCPServer through BaseEnv rollouts on MockModelServer: real MCP servers (stdio
subprocesses, streamable HTTP on 127.0.0.1) killed mid-call, hung past tool_timeout,
200 rollouts in flight, and processes and file descriptors back to baseline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from tests.conftest import LoopClock
from tests.tools.conftest import ToolsEnv, request, requests_for, tool_messages
from tests.tools.mcp_support import (
    SERVER_SCRIPT,
    START,
    child_processes,
    fds_leaked,
    http_server,
    loop_trouble,
    marked,
    open_fds,
    stdio_server,
    wait_for,
)

from benchmax.testing import MockModelServer, RecordedRequest
from benchmax.tools import MCPServer


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def plan_policy(plans: dict[str, list[dict[str, Any]]], default: list[dict[str, Any]]) -> Any:
    """Per rollout (mock session), the tool calls to make in turn; then an answer quoting
    every tool result."""

    def policy(body: dict[str, Any], recorded: RecordedRequest) -> Any:
        plan = plans.get(recorded.session, default)
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        if turn < len(plan):
            return plan[turn]
        return "results: " + " | ".join(_tool_results(body))

    return policy


async def test_stdio_per_rollout_servers_one_killed_mid_call_the_others_finish(
    tmp_path: Path, mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    children, fds = child_processes(), open_fds()
    mock_server.policy = plan_policy(
        {
            "r0": [_call("add", a=2, b=3), _call("picture")],
            "r1": [_call("count"), _call("count")],
            "r2": [_call("slow_write", seconds=60)],
            "r3": [_call("fail", message="bad input")],
        },
        default=[_call("count")],
    )
    env = ToolsEnv(tools=[stdio_server(tmp_path)])
    ids = [f"r{i}" for i in range(6)]

    async def kill_r2() -> None:
        await wait_for(lambda: bool(marked(tmp_path, "started", "slow_write")), START * 2)
        os.kill(marked(tmp_path, "started", "slow_write")[0], signal.SIGKILL)

    killer = asyncio.create_task(kill_r2())
    rollouts = await asyncio.gather(*(env.run_rollout(request(mock_server, i)) for i in ids))
    await killer
    reasons = {r.rollout_id: r.termination_reason for r in rollouts}
    assert reasons == {**dict.fromkeys(ids, "finished"), "r2": "tool_error"}
    by_id = {r.rollout_id: r for r in rollouts}
    assert tool_messages(by_id["r0"])[0] == "5"
    assert tool_messages(by_id["r0"])[1][1]["type"] == "image_url"
    assert tool_messages(by_id["r1"]) == ["1", "2"]  # its own server: counts from 1
    assert all(tool_messages(by_id[i]) == ["1"] for i in ("r4", "r5"))
    assert "bad input" in tool_messages(by_id["r3"])[0]  # isError: shown, rollout went on
    await env.aclose()  # the model connections
    await wait_for(lambda: child_processes() <= children and not fds_leaked(fds), 60)
    assert loop_trouble(caplog.records) == []


async def test_shared_stdio_session_serves_a_group(
    tmp_path: Path, mock_server: MockModelServer
) -> None:
    children = child_processes()
    mock_server.policy = plan_policy({}, default=[_call("count")])
    server = stdio_server(tmp_path, shared=True)
    env = ToolsEnv(tools=[server])
    outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1", "r2"]))
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    # The model saw one counter shared by the group: 1, 2 and 3 between the rollouts.
    counted = sorted(
        int(m["content"])
        for r in mock_server.requests
        for m in r.body["messages"]
        if m["role"] == "tool"
    )
    assert sorted(set(counted)) == [1, 2, 3]
    assert len(child_processes() - children) == 1  # one server, still open
    await server.aclose()
    await wait_for(lambda: child_processes() <= children, 60)


async def test_http_hung_call_ends_tool_timeout_and_is_cancelled_on_the_server(
    tmp_path: Path, mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = plan_policy(
        {"r0": [_call("slow_write", seconds=600)]}, default=[_call("add", a=1, b=2)]
    )
    async with http_server(tmp_path) as http:
        env = ToolsEnv(tools=[MCPServer(url=http.url)], tool_timeout=5)
        outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1"]))
        assert outcomes["r0"].termination_reason == "tool_timeout"
        assert outcomes["r1"].termination_reason == "finished"
        await wait_for(lambda: bool(marked(tmp_path, "cancelled", "slow_write")), 30)
    assert loop_trouble(caplog.records) == []


async def test_http_server_killed_mid_call_settles_tool_error(
    tmp_path: Path, mock_server: MockModelServer
) -> None:
    mock_server.policy = plan_policy({}, default=[_call("slow_read", seconds=30)])
    async with http_server(tmp_path) as http:
        env = ToolsEnv(tools=[MCPServer(url=http.url, startup_timeout=5)])
        run = asyncio.create_task(env.run_group(requests_for(mock_server, ["r0", "r1"])))
        await wait_for(lambda: len(marked(tmp_path, "started", "slow_read")) == 2, START)
        http.kill()
        outcomes = await run
    # Read-only calls are retried once, but the server is gone: the retry is refused.
    assert {o.termination_reason for o in outcomes.values()} == {"tool_error"}


async def test_two_hundred_rollouts_in_flight_over_http(
    tmp_path: Path, mock_server: MockModelServer
) -> None:
    def policy(body: dict[str, Any], recorded: RecordedRequest) -> Any:
        index = int(recorded.session[1:])
        results = _tool_results(body)
        return _call("add", a=index, b=1000) if not results else f"sum={results[0]}"

    mock_server.policy = policy
    async with http_server(tmp_path) as http:
        fds = open_fds()
        # 200 sessions opened at once queue at one server process: on a busy machine the
        # last one waits well past START, so its bound is generous.
        env = ToolsEnv(tools=[MCPServer(url=http.url, startup_timeout=10 * START)])
        ids = [f"r{i}" for i in range(200)]
        rollouts = await asyncio.gather(*(env.run_rollout(request(mock_server, i)) for i in ids))
        assert [r.termination_reason for r in rollouts] == ["finished"] * 200
        assert [r.messages[-1]["content"] for r in rollouts] == [
            f"sum={i + 1000}" for i in range(200)
        ]
        await env.aclose()
        await wait_for(lambda: not fds_leaked(fds), 60)


async def test_an_environment_with_an_mcp_server_pickles_and_runs(
    tmp_path: Path, mock_server: MockModelServer
) -> None:
    mock_server.policy = plan_policy({}, default=[_call("point")])
    async with http_server(tmp_path) as http:
        env = cloudpickle.loads(cloudpickle.dumps(ToolsEnv(tools=[MCPServer(url=http.url)])))
        rollout = await env.run_rollout(request(mock_server, "r0"))
    assert json.loads(tool_messages(rollout)[0]) == {"x": 3, "y": 4}


async def test_a_slow_starting_stdio_server_is_bounded_by_startup_timeout_not_tool_timeout(
    tmp_path: Path,
    mock_server: MockModelServer,
    caplog: pytest.LogCaptureFixture,
    loop_clock: LoopClock,
) -> None:
    """A server that takes 3 s to start (slow imports), during which a minute of the
    loop's clock passes, serves rollouts whose calls get 30 s; one that misses its
    startup_timeout ends the rollout as tool_error."""
    children = child_processes()
    mock_server.policy = plan_policy({}, default=[_call("add", a=2, b=3)])

    def slow_server(startup_timeout: float) -> MCPServer:
        return MCPServer(
            command=[sys.executable, str(SERVER_SCRIPT)],
            env={"MCP_TEST_START_DELAY": "3"},
            startup_timeout=startup_timeout,
            stderr="discard",
        )

    env = ToolsEnv(tools=[slow_server(10 * START)], tool_timeout=30)
    group = asyncio.create_task(env.run_group(requests_for(mock_server, ["r0", "r1"])))
    await wait_for(lambda: len(child_processes() - children) == 2, START)  # starting up
    await loop_clock.advance(60)  # a tool_timeout counting start-up would fire now
    outcomes = await group
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    assert {o.rewards["tool_messages"] for o in outcomes.values()} == {1.0}
    assert _tool_results(mock_server.requests[-1].body) == ["5"]

    env = ToolsEnv(tools=[slow_server(1.0)], tool_timeout=30)
    rollout = await env.run_rollout(request(mock_server, "too-slow"))
    assert rollout.termination_reason == "tool_error"
    assert "did not start within 1s" in caplog.text
    await env.aclose()
    await wait_for(lambda: child_processes() <= children, 60)
