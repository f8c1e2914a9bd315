"""Issue 28 kind 5: no MCP server process outlives its rollout or the run, whatever the
server does (starts children, is a launcher whose forked server ignores the end of its
input, ignores SIGTERM) and however short ``tool_timeout`` is (shorter than the close's
own TERM/KILL escalation). Every check scans the whole process table (``/proc``) for the
test's marker directory, which is on the command line of every process the servers start.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests.tools.conftest import ToolsEnv, request
from tests.tools.mcp_support import (
    RAW_SERVER_SCRIPT,
    START,
    child_processes,
    processes_naming,
    raw_server,
    wait_for,
)

from benchmax.testing import MockModelServer, RecordedRequest, scripted
from benchmax.tools import MCPServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BEHAVIOURS = [
    ("children",),
    ("launcher",),
    ("launcher", "linger"),
    ("launcher", "ignore-term"),
    ("ignore-term",),
    ("ignore-term", "children"),
    ("linger",),
]
SETTLE = 30.0
"""Seconds a SIGKILLed process may take to leave the process table on a busy machine."""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def started(marks: Path) -> int:
    return sum(1 for entry in marks.iterdir() if entry.name.startswith("pid-"))


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids="+".join)
async def test_nothing_a_server_started_outlives_its_rollout(
    tmp_path: Path, mock_server: MockModelServer, behaviour: tuple[str, ...]
) -> None:
    children = child_processes()
    mock_server.policy = scripted([call("echo", text="hi"), "done"])
    env = ToolsEnv(tools=[raw_server(tmp_path, *behaviour)], tool_timeout=0.3)
    # tool_timeout is far shorter than a close's escalation (and may even end the listing
    # on a busy machine: the outcome does not matter here, the processes do).
    await env.run_rollout(request(mock_server))
    expected = 1 + ("launcher" in behaviour) + 2 * ("children" in behaviour)
    assert started(tmp_path) == expected  # every process the test means did start
    await wait_for(lambda: not processes_naming(str(tmp_path)), SETTLE)
    await wait_for(lambda: child_processes() <= children, SETTLE)  # reaped too
    await env.aclose()


async def test_many_rollouts_leave_no_process(tmp_path: Path, mock_server: MockModelServer) -> None:
    children = child_processes()
    mock_server.policy = scripted([call("echo", text="hi"), "done"])
    env = ToolsEnv(tools=[raw_server(tmp_path, "launcher", "linger")], tool_timeout=0.3)
    count = 24
    await asyncio.gather(*(env.run_rollout(request(mock_server, f"r{i}")) for i in range(count)))
    assert started(tmp_path) == 2 * count
    await wait_for(lambda: not processes_naming(str(tmp_path)), SETTLE)
    await wait_for(lambda: child_processes() <= children, SETTLE)
    await env.aclose()


async def test_a_cancelled_rollout_leaves_no_process(
    tmp_path: Path, mock_server: MockModelServer
) -> None:
    # The call blocks: the model asks for a tool the server answers, then the rollout's
    # task is cancelled while the model is being asked again (policy never answers).
    answered = asyncio.Event()

    async def policy(body: dict[str, Any], recorded: RecordedRequest) -> Any:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return call("echo", text="hi")
        answered.set()
        await asyncio.Event().wait()

    mock_server.policy = policy
    env = ToolsEnv(tools=[raw_server(tmp_path, "ignore-term", "children")], tool_timeout=0.3)
    task = asyncio.create_task(env.run_rollout(request(mock_server)))
    await asyncio.wait_for(answered.wait(), START)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_for(lambda: not processes_naming(str(tmp_path)), SETTLE)
    await env.aclose()


ENV_MODULE = """
import sys
from pathlib import Path

from benchmax.envs import BaseEnv, Dataset, Example
from benchmax.tools import MCPServer


class LeakEnv(BaseEnv):
    reward_keys = ("ok",)
    max_turns = 3
    tool_timeout = 0.3
    tools = (
        MCPServer(
            command=[sys.executable, {script!r}, {marks!r}, *{behaviour!r}],
            stderr="discard",
            shared={shared!r},
            startup_timeout=60.0,
        ),
    )

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        prompt = [{{"role": "user", "content": "use the tool"}}]
        rows = [Example(id=f"e{{i}}", payload={{"prompt_messages": prompt}}) for i in range(3)]
        return Dataset(rows)

    async def compute_reward(self, rollout):
        return {{"ok": 1.0}}
"""

POLICY_MODULE = """
def policy(body, recorded):
    if any(m["role"] == "tool" for m in body["messages"]):
        return "done"
    return {"content": None, "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}
"""


@pytest.mark.parametrize("shared", [False, True], ids=["per-rollout", "shared"])
def test_benchmax_run_exits_and_leaves_no_process(tmp_path: Path, shared: bool) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    behaviour = ["launcher", "ignore-term", "children"]
    (tmp_path / "leak_env.py").write_text(
        textwrap.dedent(ENV_MODULE).format(
            script=str(RAW_SERVER_SCRIPT), marks=str(marks), behaviour=behaviour, shared=shared
        )
    )
    (tmp_path / "leak_policy.py").write_text(POLICY_MODULE)
    output = tmp_path / "out.jsonl"
    policy = f"{tmp_path / 'leak_policy.py'}:policy"
    command = [
        sys.executable, "-m", "benchmax.cli", "run", f"{tmp_path / 'leak_env.py'}:LeakEnv",
        "--data", str(tmp_path), "-k", "2", "--mock-policy", policy, "-o", str(output),
        "--fail-on-error", "1",  # rollouts whose tools misbehave may fail: the run must end
    ]  # fmt: skip
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    lines = output.read_text().splitlines()
    assert len(lines) == 1 + 6  # the header and every rollout
    assert started(marks) == (1 if shared else 6) * 4  # launcher, server, two children
    # Nothing is left once the run has exited: not the servers, not what they started.
    asyncio.run(wait_for(lambda: not processes_naming(str(marks)), SETTLE))


async def test_a_shared_server_is_stopped_when_its_loop_ends(tmp_path: Path) -> None:
    script = tmp_path / "shared.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            from benchmax.tools import MCPServer

            async def main():
                server = MCPServer(
                    command=[sys.executable, {str(RAW_SERVER_SCRIPT)!r}, {str(tmp_path)!r},
                             "ignore-term", "children"],
                    shared=True, stderr="discard", startup_timeout=60.0,
                )
                session = await server.open_session("r0")
                print(await session.call_tool("echo", {{"text": "up"}}), flush=True)
                # no aclose: the loop's end must stop the server

            asyncio.run(main())
            """
        )
    )
    finished = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.strip() == "up"
    assert started(tmp_path) == 3
    await wait_for(lambda: not processes_naming(str(tmp_path)), SETTLE)


def test_the_server_is_started_in_a_session_of_its_own(tmp_path: Path) -> None:
    server = MCPServer(
        command=[sys.executable, str(RAW_SERVER_SCRIPT), str(tmp_path)], stderr="discard"
    )

    async def main() -> tuple[int, int]:
        session = await server.open_session("r0")
        try:
            await session.list_tools()
            (mark,) = tmp_path.iterdir()
            pid = int(mark.name.removeprefix("pid-"))
            return pid, _session_of(pid)
        finally:
            await session.aclose()

    pid, session = asyncio.run(main())
    assert session == pid  # its own session: the group a close kills holds only its own


def _session_of(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[3])
