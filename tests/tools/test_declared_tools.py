"""``BaseEnv.tools``: @tool functions, Toolsets and tool providers in real rollouts against
the mock model server; sessions per rollout, closed whatever the outcome."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
from tests.tools.conftest import (
    ECHO_SPEC,
    RecordingProvider,
    ToolsEnv,
    request,
    requests_for,
    tool_messages,
)

from benchmax.envs.shared_types import RolloutFailure
from benchmax.testing import MockModelServer, scripted, tool_exerciser
from benchmax.tools import ToolError, Toolset, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def shout(text: str, style: Literal["upper", "title"] = "upper") -> str:
    """Shout the text."""
    return text.upper() if style == "upper" else text.title()


@tool
def refuse(path: str) -> str:
    """Read a file (there are none)."""
    raise ToolError(f"no such file: {path}")


@tool
def explode() -> str:
    """Fails."""
    raise RuntimeError("tool bug")


@tool
async def sleepy(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "awake"


def call(name: str, arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


class Arith(ToolsEnv):
    tools = (add, shout)


async def test_tool_functions_are_advertised_and_run(mock_server: MockModelServer) -> None:
    mock_server.policy = tool_exerciser
    env = Arith()
    outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1"]))
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    assert {o.rewards["tool_messages"] for o in outcomes.values()} == {2.0}
    first = mock_server.requests_for("r0")[0].body
    assert first["tools"] == [add.spec, shout.spec]
    followup = mock_server.requests_for("r0")[1].body["messages"]
    assert [m["content"] for m in followup if m["role"] == "tool"] == ["2", "EXAMPLE"]
    await env.aclose()


async def test_tool_error_is_shown_and_the_rollout_goes_on(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted([call("refuse", {"path": "a.txt"}), "sorry"])
    env = ToolsEnv(tools=[refuse])
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == ["no such file: a.txt"]
    await env.aclose()


async def test_hand_written_run_tool_may_raise_tool_error(mock_server: MockModelServer) -> None:
    class HandWritten(ToolsEnv):
        async def list_tools(self) -> list[Any]:
            return [ECHO_SPEC]

        async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
            raise ToolError(f"{tool_name} is down for maintenance")

    mock_server.policy = scripted([call("remote_echo", {"text": "hi"}), "ok"])
    env = HandWritten()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == ["remote_echo is down for maintenance"]
    await env.aclose()


async def test_invalid_arguments_name_the_argument_and_the_rollout_goes_on(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(
        [
            call("add", {"a": 1}),
            call("shout", {"text": "x", "style": "lower"}),
            call("add", {"a": "one", "b": 2}),
            call("add", {"a": 1, "b": 2}),
            "done",
        ]
    )
    env = Arith(max_turns=5)
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == [
        "Invalid tool arguments: 'b' is a required property",
        "Invalid tool arguments: style: 'lower' is not one of ['upper', 'title']",
        "Invalid tool arguments: a: 'one' is not of type 'integer'",
        "3",
    ]
    await env.aclose()


async def test_other_exceptions_stay_tool_error_for_that_rollout_only(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    def policy(body: dict[str, Any], recorded: Any) -> Any:
        if any(m["role"] == "tool" for m in body["messages"]):
            return "done"
        return call(
            "explode" if recorded.session == "r0" else "add",
            {"a": 1, "b": 1} if recorded.session != "r0" else {},
        )

    mock_server.policy = policy
    env = ToolsEnv(tools=[add, explode])
    outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1"]))
    assert outcomes["r0"].termination_reason == "tool_error"
    assert outcomes["r1"].termination_reason == "finished"
    assert "tool bug" in caplog.text
    await env.aclose()


async def test_tool_timeout_bounds_each_call(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(
        [call("sleepy", {"seconds": 0.01}), call("sleepy", {"seconds": 30}), "late"]
    )
    env = ToolsEnv(tools=[sleepy], tool_timeout=0.5)
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "tool_timeout"
    assert tool_messages(rollout) == ["awake"]
    await env.aclose()


class Notebook(Toolset):
    """Per-rollout notes seeded from the example; logs its contexts."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []  # shared by every rollout (set in __init__)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
        self.notes: dict[str, str] = dict(example.payload.get("notes", {}))
        self.log.append(("enter", rollout_id))
        try:
            yield
        finally:
            self.log.append(("exit", rollout_id))

    @tool
    def write(self, title: str, text: str) -> str:
        """Write a note."""
        self.notes[title] = text
        return f"saved {title}"

    @tool
    async def read(self, title: str) -> str:
        """Read a note."""
        await asyncio.sleep(0.01)  # let the other rollouts interleave
        if title not in self.notes:
            raise ToolError(f"no note titled {title!r}")
        return self.notes[title]


async def test_toolset_state_belongs_to_one_rollout(mock_server: MockModelServer) -> None:
    def policy(body: dict[str, Any], recorded: Any) -> Any:
        done = sum(m["role"] == "tool" for m in body["messages"])
        me = recorded.session
        steps = [
            call("read", {"title": "seed"}),
            call("write", {"title": "mine", "text": f"by {me}"}),
            call("read", {"title": "mine"}),
        ]
        return steps[done] if done < len(steps) else "done"

    notebook = Notebook()
    mock_server.policy = policy
    env = ToolsEnv(tools=[notebook])
    ids = [f"r{i}" for i in range(8)]
    requests = [
        request(mock_server, rollout_id, {"notes": {"seed": f"seed of {rollout_id}"}})
        for rollout_id in ids
    ]
    outcomes = await env.run_group(requests)
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    for rollout_id in ids:
        messages = mock_server.requests_for(rollout_id)[-1].body["messages"]
        assert [m["content"] for m in messages if m["role"] == "tool"] == [
            f"seed of {rollout_id}",
            "saved mine",
            f"by {rollout_id}",
        ]
    assert sorted(notebook.log) == sorted([("enter", r) for r in ids] + [("exit", r) for r in ids])
    assert not hasattr(notebook, "notes")
    await env.aclose()


async def test_toolset_context_exits_on_failure_and_on_cancellation(
    mock_server: MockModelServer,
) -> None:
    class FragileNotebook(Notebook):
        @tool
        def crash(self) -> str:
            """Crashes."""
            raise RuntimeError("boom")

    notebook = FragileNotebook()
    mock_server.policy = scripted([call("crash", {})])
    env = ToolsEnv(tools=[notebook])
    rollout = await env.run_rollout(request(mock_server, "failing"))
    assert rollout.termination_reason == "tool_error"
    assert notebook.log == [("enter", "failing"), ("exit", "failing")]

    started = asyncio.Event()

    class Waiting(Notebook):
        @tool
        async def wait(self) -> str:
            """Waits."""
            started.set()
            await asyncio.sleep(60)
            return "never"

    slow = Waiting()
    mock_server.policy = scripted([call("wait", {})])
    env = ToolsEnv(tools=[slow])
    task = asyncio.create_task(env.run_rollout(request(mock_server, "cancelled")))
    await asyncio.wait_for(started.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.log == [("enter", "cancelled"), ("exit", "cancelled")]
    await env.aclose()


async def test_a_toolset_that_fails_to_open_settles_its_rollout_only(
    mock_server: MockModelServer,
) -> None:
    class Picky(Notebook):
        @asynccontextmanager
        async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
            if rollout_id == "r0":
                raise OSError("sandbox service refused")
            async with super().rollout_context(rollout_id, example):
                yield

    class Budget(Toolset):
        @asynccontextmanager
        async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
            if rollout_id == "r1":
                raise RolloutFailure("tool_budget_exceeded", "no quota left")
            yield

    mock_server.policy = scripted(["plain answer"], when_exhausted="repeat_last")
    env = ToolsEnv(tools=[Picky(), Budget()])
    outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1", "r2"]))
    assert outcomes["r0"].termination_reason == "tool_error"
    assert outcomes["r0"].rewards == {"tool_messages": 0.0}
    assert outcomes["r1"].termination_reason == "tool_budget_exceeded"
    assert outcomes["r2"].termination_reason == "finished"
    assert {r.session for r in mock_server.requests} == {"r2"}  # no model call for r0, r1
    await env.aclose()


async def test_provider_sessions_are_opened_and_closed_per_rollout(
    mock_server: MockModelServer,
) -> None:
    provider = RecordingProvider()
    mock_server.policy = scripted(
        [call("remote_echo", {"text": "hi"}), call("remote_echo", {"text": "forbidden"}), "ok"]
    )
    env = ToolsEnv(tools=[add, provider])
    outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1"]))
    assert {o.termination_reason for o in outcomes.values()} == {"finished"}
    for rollout_id in ("r0", "r1"):
        body = mock_server.requests_for(rollout_id)[-1].body
        assert body["tools"] == [add.spec, ECHO_SPEC]
        assert [m["content"] for m in body["messages"] if m["role"] == "tool"] == [
            [{"type": "text", "text": f"{rollout_id}:hi"}],
            "that text is not allowed",
        ]
    assert sorted(provider.log) == [
        ("close", "r0"),
        ("close", "r1"),
        ("open", "r0"),
        ("open", "r1"),
    ]
    await env.aclose()


async def test_a_refusing_provider_settles_tool_error_and_siblings_finish(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    class HalfRefusing(RecordingProvider):
        async def open_session(self, rollout_id: str) -> Any:
            if rollout_id == "r1":
                raise ConnectionRefusedError("connection refused")
            return await super().open_session(rollout_id)

    provider = HalfRefusing()
    mock_server.policy = scripted([call("remote_echo", {"text": "hi"}), "ok"])
    env = ToolsEnv(tools=[provider])
    outcomes = await env.run_group(requests_for(mock_server, ["r0", "r1"]))
    assert outcomes["r0"].termination_reason == "finished"
    assert outcomes["r1"].termination_reason == "tool_error"
    assert "opening tools: connection refused" in caplog.text
    assert provider.log == [("open", "r0"), ("close", "r0")]
    await env.aclose()


async def test_provider_calls_are_bounded_by_tool_timeout_but_not_its_start_up(
    mock_server: MockModelServer,
) -> None:
    # Start-up is the provider's own to bound (MCPServer: startup_timeout).
    slow = RecordingProvider(slow_open=1.0)
    mock_server.policy = scripted([call("remote_echo", {"text": "hi"}), "done"])
    env = ToolsEnv(tools=[slow], tool_timeout=0.3)
    rollout = await env.run_rollout(request(mock_server, "slow-open"))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == [[{"type": "text", "text": "slow-open:hi"}]]
    assert slow.log == [("open", "slow-open"), ("close", "slow-open")]

    hanging = RecordingProvider(hang=True)
    mock_server.policy = scripted([call("remote_echo", {"text": "hi"})])
    env = ToolsEnv(tools=[hanging], tool_timeout=0.3)
    rollout = await env.run_rollout(request(mock_server, "hung-call"))
    assert rollout.termination_reason == "tool_timeout"
    assert hanging.log == [("open", "hung-call"), ("close", "hung-call")]

    failing = RecordingProvider(fail=True)
    mock_server.policy = scripted([call("remote_echo", {"text": "hi"})])
    env = ToolsEnv(tools=[failing])
    rollout = await env.run_rollout(request(mock_server, "crashed"))
    assert rollout.termination_reason == "tool_error"
    assert failing.log == [("open", "crashed"), ("close", "crashed")]
    await env.aclose()


async def test_provider_sessions_close_when_the_rollout_is_cancelled(
    mock_server: MockModelServer,
) -> None:
    provider = RecordingProvider(hang=True)
    mock_server.policy = scripted([call("remote_echo", {"text": "hi"})])
    env = ToolsEnv(tools=[provider])
    task = asyncio.create_task(env.run_rollout(request(mock_server, "c0")))
    for _ in range(500):
        if provider.sessions and provider.sessions[0].calls:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.log == [("open", "c0"), ("close", "c0")]
    await env.aclose()


async def test_a_name_declared_twice_is_a_contract_error(mock_server: MockModelServer) -> None:
    @tool(name="add")
    def other_add(a: int) -> int:
        return a

    env = ToolsEnv(tools=[add, other_add])
    with pytest.raises(ValueError, match=r"tool name 'add' is declared twice") as raised:
        await env.run_group(requests_for(mock_server, ["r0"]))
    assert "benchmax: raised by ToolsEnv.tools" in raised.value.__notes__
    with pytest.raises(ValueError, match="declared twice"):
        await env.list_tools()


def test_tools_entries_are_checked_when_given() -> None:
    def plain(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    env = ToolsEnv(tools=[plain, add])
    assert env.tools[0].name == "plain" and env.tools[1] is add
    with pytest.raises(TypeError, match=r"tools\[0\] is a int"):
        ToolsEnv(tools=[3])
    with pytest.raises(TypeError, match=r"tools\[0\] is the Toolset class Notebook"):
        ToolsEnv(tools=[Notebook])
    with pytest.raises(TypeError, match="tools must be a list"):
        ToolsEnv(tools="add")  # type: ignore[arg-type]


async def test_list_tools_outside_a_rollout_lists_every_kind() -> None:
    provider = RecordingProvider()
    env = ToolsEnv(tools=[add, Notebook(), provider])
    names = [t["function"]["name"] for t in await env.list_tools()]
    assert names == ["add", "write", "read", "remote_echo"]
    assert provider.log == [("open", "benchmax.list_tools"), ("close", "benchmax.list_tools")]
    with pytest.raises(RuntimeError, match="declared tools run only inside their rollout"):
        await env.run_tool("r0", "add", a=1, b=2)


async def test_hand_written_overrides_can_extend_the_declared_tools(
    mock_server: MockModelServer,
) -> None:
    class Extended(ToolsEnv):
        tools = (add,)

        async def list_tools(self) -> list[Any]:
            return [*await super().list_tools(), ECHO_SPEC]

        async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
            if tool_name == "remote_echo":
                return {"echo": tool_args["text"]}
            return await super().run_tool(rollout_id, tool_name, **tool_args)

    mock_server.policy = tool_exerciser
    env = Extended()
    rollout = await env.run_rollout(request(mock_server))
    assert rollout.termination_reason == "finished"
    assert tool_messages(rollout) == ["2", '{"echo":"example"}']
    await env.aclose()
