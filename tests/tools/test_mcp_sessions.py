"""MCPServer sessions against real MCP servers (stdio subprocesses and streamable HTTP on
127.0.0.1, written with the SDK's server API): listing, result mapping, isolation,
cancellation, crashes, start-up failures, auth."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest
from tests.conftest import ProcessTag
from tests.tools.mcp_support import (
    SERVER_SCRIPT,
    START,
    alive,
    child_processes,
    http_server,
    loop_trouble,
    marked,
    stdio_server,
    wait_for,
)

from benchmax.auth import InjectedAuth, StaticBearerAuth, bind_model_auth
from benchmax.tools import MCPServer, MCPServerError, ToolError

SHUTDOWN = 60.0  # a bound for a busy machine: a server usually goes in well under a second
"""Seconds for a server to be gone after its session closes (the SDK's escalation from
closing stdin to SIGKILL takes at most about six)."""


# ---- configuration -------------------------------------------------------------------


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPServer()
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPServer(command=["x"], url="http://127.0.0.1:1/mcp")
    with pytest.raises(TypeError, match="sequence of strings"):
        MCPServer(command="python server.py")
    with pytest.raises(ValueError, match="non-empty list"):
        MCPServer(command=[])
    with pytest.raises(ValueError, match="http:// or https://"):
        MCPServer(url="ftp://example.com/mcp")
    with pytest.raises(ValueError, match="url servers only"):
        MCPServer(command=["x"], auth=StaticBearerAuth("t"))
    with pytest.raises(ValueError, match="command servers only"):
        MCPServer(url="http://127.0.0.1:1/mcp", env={"A": "b"})
    with pytest.raises(TypeError, match="strings to strings"):
        MCPServer(command=["x"], env={"A": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="prefix"):
        MCPServer(command=["x"], prefix="fs.")
    with pytest.raises(ValueError, match="startup_timeout"):
        MCPServer(command=["x"], startup_timeout=0)
    with pytest.raises(ValueError, match="retries"):
        MCPServer(command=["x"], retries=-1)
    with pytest.raises(ValueError, match="stderr"):
        MCPServer(command=["x"], stderr="file")  # type: ignore[arg-type]


def test_repr_masks_secrets_and_the_value_pickles() -> None:
    stdio = MCPServer(command=["srv", "--flag"], env={"API_KEY": "sk-env-secret"}, prefix="a_")
    http = MCPServer(url="https://user:pa55word@tools.example/mcp", auth=StaticBearerAuth("tok-1"))
    for server in (stdio, http):
        text = repr(server) + server.label
        for secret in ("sk-env-secret", "pa55word", "tok-1"):
            assert secret not in text
    expected = "MCPServer(command=['srv', '--flag'], env={'API_KEY': '***'}, prefix='a_')"
    assert repr(stdio) == expected
    assert http.label == "https://user:***@tools.example/mcp"
    copy = cloudpickle.loads(cloudpickle.dumps(stdio))
    assert repr(copy) == repr(stdio) and copy.env == {"API_KEY": "sk-env-secret"}


def test_import_benchmax_tools_does_not_import_mcp() -> None:
    code = (
        "import sys, benchmax.tools, benchmax.envs\n"
        "from benchmax.tools import MCPServer\n"
        "MCPServer(command=['x'])\n"
        "assert not any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules), 'mcp imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- stdio -----------------------------------------------------------------------------


async def test_stdio_tools_results_and_per_rollout_isolation(tmp_path: Path) -> None:
    server = stdio_server(tmp_path, prefix="t_")
    first = await server.open_session("r1")
    second = await server.open_session("r2")
    try:
        tools = {t["function"]["name"]: t["function"] for t in await first.list_tools()}
        assert {"t_add", "t_count", "t_picture", "t_point", "t_fail"} <= set(tools)
        assert tools["t_add"]["description"] == "Add two integers."
        assert tools["t_add"]["parameters"]["required"] == ["a", "b"]
        await second.list_tools()

        assert await first.call_tool("t_add", {"a": 2, "b": 3}) == "5"
        assert await first.call_tool("t_point", {}) == '{\n  "x": 3,\n  "y": 4\n}'
        picture = await first.call_tool("t_picture", {})
        assert picture[0] == {"type": "text", "text": "a test image"}
        url = picture[1]["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG")
        with pytest.raises(ToolError, match="no such file"):
            await first.call_tool("t_fail", {"message": "no such file"})
        with pytest.raises(ToolError, match="Unknown tool: add"):
            await first.call_tool("add", {"a": 1, "b": 1})

        # One server process per rollout: no state leaks between them.
        assert [await first.call_tool("t_count", {}) for _ in range(3)] == ["1", "2", "3"]
        assert await second.call_tool("t_count", {}) == "1"
        pids = {await first.call_tool("t_pid", {}), await second.call_tool("t_pid", {})}
        assert len(pids) == 2
    finally:
        await first.aclose()
        await second.aclose()
    await wait_for(lambda: not any(alive(int(pid)) for pid in pids), SHUTDOWN)


async def test_shared_session_serves_every_rollout_until_aclose(tmp_path: Path) -> None:
    server = stdio_server(tmp_path, shared=True)
    sessions = [await server.open_session(f"r{i}") for i in range(3)]
    for session in sessions:
        await session.list_tools()
    counts = [await session.call_tool("count", {}) for session in sessions]
    assert counts == ["1", "2", "3"]
    pid = int(await sessions[0].call_tool("pid", {}))
    for session in sessions:
        await session.aclose()  # a rollout's end leaves the shared session open
    assert alive(pid)
    assert await (await server.open_session("r9")).call_tool("count", {}) == "4"
    await server.aclose()
    await wait_for(lambda: not alive(pid), SHUTDOWN)


async def test_hung_call_is_cancelled_on_the_server_and_the_session_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = await stdio_server(tmp_path).open_session("r1")
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await session.call_tool("slow_write", {"seconds": 600})
        await wait_for(lambda: bool(marked(tmp_path, "cancelled", "slow_write")), 30)
        assert await session.call_tool("add", {"a": 1, "b": 1}) == "2"
        pid = int(await session.call_tool("pid", {}))
    finally:
        await session.aclose()
    assert not alive(pid)  # aclose returns once the server is gone
    assert loop_trouble(caplog.records) == []


async def test_a_server_blocked_in_a_call_is_killed_when_the_session_closes(
    tmp_path: Path,
) -> None:
    before = child_processes()
    session = await stdio_server(tmp_path).open_session("r1")
    pid = int(await session.call_tool("pid", {}))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await session.call_tool("block", {"seconds": 600})
    await session.aclose()
    assert not alive(pid)
    assert child_processes() <= before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="found through /proc")
async def test_a_daemon_the_server_started_is_killed_when_the_session_closes(
    tmp_path: Path, process_tag: ProcessTag
) -> None:
    """A daemon that double-forked, called setsid and closed its pipes is no member of the
    server's session, but carries the server's marker: closing the session kills it."""
    pid_file = tmp_path / "daemon.pid"
    server = MCPServer(
        command=[sys.executable, str(SERVER_SCRIPT)],
        env={"MCP_TEST_DAEMON": str(pid_file), **process_tag.environment},
        startup_timeout=START,
        stderr="discard",
    )
    session = await server.open_session("r1")
    assert await session.call_tool("add", {"a": 1, "b": 1}) == "2"
    daemon = int(pid_file.read_text())
    assert alive(daemon) and process_tag.alive()
    await session.aclose()
    assert not alive(daemon)
    assert process_tag.alive() == []


async def test_kill_9_mid_call_retries_read_only_tools_only(tmp_path: Path) -> None:
    session = await stdio_server(tmp_path).open_session("r1")
    try:
        first = int(await session.call_tool("pid", {}))

        async def kill(tool: str, pid: int) -> None:
            await wait_for(lambda: pid in marked(tmp_path, "started", tool), START)
            os.kill(pid, signal.SIGKILL)

        killer = asyncio.create_task(kill("slow_read", first))
        # Read-only: repeated on a new server process.
        assert await session.call_tool("slow_read", {"seconds": 2}) == "slow_read done"
        await killer
        second = int(await session.call_tool("pid", {}))
        assert second != first and not alive(first)

        killer = asyncio.create_task(kill("slow_write", second))
        with pytest.raises(MCPServerError, match="connection closed during tools/call"):
            await session.call_tool("slow_write", {"seconds": 5})
        await killer
    finally:
        await session.aclose()
    assert not alive(second)


async def test_a_crash_mid_call_fails_the_call(tmp_path: Path) -> None:
    session = await stdio_server(tmp_path, retries=3).open_session("r1")
    try:
        with pytest.raises(MCPServerError, match="connection closed"):
            await session.call_tool("crash", {})  # not read-only: never repeated
    finally:
        await session.aclose()


async def test_start_up_failures_raise_mcp_server_error_and_leave_nothing_running(
    tmp_path: Path,
) -> None:
    before = child_processes()
    missing = MCPServer(command=[str(tmp_path / "no-such-server")])
    with pytest.raises(MCPServerError, match="failed to start"):
        await missing.open_session("r1")

    mute = MCPServer(command=[sys.executable, "-c", "import time; time.sleep(600)"],
                     startup_timeout=1.0)  # fmt: skip
    with pytest.raises(MCPServerError, match="did not start within 1s"):
        await mute.open_session("r1")

    exits = MCPServer(command=[sys.executable, "-c", "print('not mcp')"], stderr="discard")
    with pytest.raises(MCPServerError, match="failed to start"):
        await exits.open_session("r1")
    assert child_processes() <= before


# ---- streamable HTTP -------------------------------------------------------------------


async def test_http_server_with_bearer_auth(tmp_path: Path) -> None:
    async with http_server(tmp_path, token="tok-secret-1") as http:
        server = MCPServer(url=http.url, auth=StaticBearerAuth("tok-secret-1"))
        session = await server.open_session("r1")
        try:
            names = {t["function"]["name"] for t in await session.list_tools()}
            assert "add" in names
            assert await session.call_tool("add", {"a": 20, "b": 22}) == "42"
            picture = await session.call_tool("picture", {})
            assert picture[1]["type"] == "image_url"
        finally:
            await session.aclose()

        wrong = MCPServer(url=http.url, auth=StaticBearerAuth("tok-wrong-2"), startup_timeout=START)
        with pytest.raises(MCPServerError) as refused:
            await wrong.open_session("r2")
        assert "tok-wrong-2" not in str(refused.value)

        injected = MCPServer(url=http.url, auth=InjectedAuth("tools"))
        with bind_model_auth({"tools": StaticBearerAuth("tok-secret-1")}):
            session = await injected.open_session("r3")
            try:
                assert await session.call_tool("add", {"a": 1, "b": 2}) == "3"
            finally:
                await session.aclose()


async def test_http_per_rollout_sessions_are_separate(tmp_path: Path) -> None:
    async with http_server(tmp_path) as http:
        server = MCPServer(url=http.url)
        first, second = await server.open_session("r1"), await server.open_session("r2")
        try:
            # The server process is shared but each MCP session is its own.
            assert await first.call_tool("add", {"a": 1, "b": 1}) == "2"
            assert await second.call_tool("add", {"a": 2, "b": 2}) == "4"
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await first.call_tool("slow_write", {"seconds": 600})
            await wait_for(lambda: bool(marked(tmp_path, "cancelled", "slow_write")), 30)
            assert await first.call_tool("add", {"a": 3, "b": 3}) == "6"
        finally:
            await first.aclose()
            await second.aclose()


async def test_http_refused_and_killed_servers(tmp_path: Path) -> None:
    async with http_server(tmp_path) as http:
        url = http.url
        session = await MCPServer(url=url).open_session("r1")
        try:
            call = asyncio.create_task(session.call_tool("slow_write", {"seconds": 30}))
            await wait_for(lambda: bool(marked(tmp_path, "started", "slow_write")), START)
            http.kill()
            with pytest.raises(MCPServerError):
                await call
        finally:
            await session.aclose()
    with pytest.raises(MCPServerError, match="failed to start"):
        await MCPServer(url=url, startup_timeout=START).open_session("r2")
