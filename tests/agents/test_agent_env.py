"""AgentEnv: real subprocesses against the real mock model, through the capture endpoint.

Every way a program can go wrong settles as its documented termination reason with zero
rewards, and no process of it outlives the rollout."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from benchmax.agents import AgentEndpoint, AgentEnv, AgentOutput, AgentRollout, AgentTask
from benchmax.envs import Example, RolloutRequest, StaticBearerAuth
from benchmax.testing import MockModelServer, echo
from benchmax.training import collect_group

UPSTREAM_KEY = "sk-upstream-secret-abcdef0123456789"

CALL_ONCE = """
import json, os, sys
from openai import OpenAI
task = json.load(sys.stdin)
client = OpenAI()
reply = client.chat.completions.create(
    model=os.environ["OPENAI_MODEL"], messages=[{"role": "user", "content": task["say"]}]
)
print(reply.choices[0].message.content)
"""


class ProgramEnv(AgentEnv):
    reward_keys = ("said",)
    rollout_timeout = 60.0

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: Any = None) -> Any:
        raise NotImplementedError

    async def compute_reward(self, rollout: AgentRollout) -> dict[str, float]:
        said = rollout.example_args["say"]
        return {"said": float(rollout.agent.stdout.strip() == said)}


def program_env(tmp_path: Path, source: str, **settings: Any) -> ProgramEnv:
    script = tmp_path / f"program_{len(list(tmp_path.iterdir()))}.py"
    script.write_text(textwrap.dedent(source))
    env = type("Program", (ProgramEnv,), {"command": (sys.executable, str(script)), **settings})()
    return env


@pytest.fixture
async def upstream() -> AsyncIterator[MockModelServer]:
    async with MockModelServer(echo, tokens=True) as server:
        yield server


def request(
    server: MockModelServer, rollout_id: str = "r1", say: str = "hi"
) -> RolloutRequest[Any]:
    return RolloutRequest(
        rollout_id=rollout_id,
        example=Example(id="ex", payload={"say": say}),
        model="policy",
        base_url=server.base_url,
        model_auth=StaticBearerAuth(UPSTREAM_KEY),
    )


async def run_one(env: AgentEnv, server: MockModelServer, **kw: Any) -> Any:
    group = await collect_group(env, [request(server, **kw)])
    (trajectory,) = group.trajectories
    return trajectory


async def test_program_rollout_is_captured_and_scored(
    tmp_path: Path, upstream: MockModelServer
) -> None:
    env = program_env(tmp_path, CALL_ONCE)
    trajectory = await run_one(env, upstream, say="hello there")
    assert trajectory.termination_reason == "finished"
    assert trajectory.rewards == {"said": 1.0}
    (call,) = trajectory.model_calls
    assert call.has_tokens and call.message_index == 1
    assert trajectory.messages[-1]["content"] == "hello there"
    coverage = trajectory.coverage
    assert coverage.sampled_tokens == coverage.trained_tokens == len(call.completion_token_ids)
    # the record's timings and usage come from the captured calls (no tool ran)
    assert trajectory.timings["model_seconds"] == pytest.approx(call.seconds, abs=1e-6)
    assert trajectory.timings["tool_seconds"] == 0.0
    assert trajectory.timings["reward_seconds"] >= 0.0
    assert trajectory.usage is not None
    assert trajectory.usage["completion_tokens"] == len(call.completion_token_ids)


async def test_rollout_agent_fields_for_compute_reward(
    tmp_path: Path, upstream: MockModelServer
) -> None:
    seen: list[AgentRollout] = []

    class Seeing(ProgramEnv):
        command = (sys.executable, "-c", CALL_ONCE + "open('made.txt', 'w').write('x')\n")

        async def compute_reward(self, rollout: AgentRollout) -> dict[str, float]:
            seen.append(rollout)
            assert (rollout.agent.workdir / "made.txt").read_text() == "x"
            return {"said": 1.0}

    rollout = await Seeing().run_rollout(request(upstream, say="abc"))
    assert rollout.termination_reason == "finished"
    agent = seen[0].agent
    assert (agent.exit_code, agent.stdout.strip()) == (0, "abc")
    assert len(agent.calls) == 1 and agent.calls[0].message["content"] == "abc"
    assert not agent.workdir.exists()  # removed once scored


async def test_run_agent_callable(upstream: MockModelServer) -> None:
    class InProcess(ProgramEnv):
        async def run_agent(self, rollout: AgentTask, endpoint: AgentEndpoint) -> AgentOutput:
            async with openai.AsyncOpenAI(
                base_url=endpoint.base_url, api_key=endpoint.api_key
            ) as client:  # closed on this loop (an unclosed one closes on a later, dead loop)
                reply = await client.chat.completions.create(
                    model=endpoint.model,
                    messages=[{"role": "user", "content": rollout.payload["say"]}],
                )
            return AgentOutput(stdout=reply.choices[0].message.content or "")

    rollout = await InProcess().run_rollout(request(upstream, say="inside"))
    assert (rollout.termination_reason, rollout.rewards) == ("finished", {"said": 1.0})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"


HANG = """
import os, sys, time
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
time.sleep(600)
"""

CHILD = (
    CALL_ONCE
    + """
import subprocess
child = subprocess.Popen(["sleep", "600"])
open(os.environ["PID_FILE"], "w").write(str(child.pid))
"""
)

DAEMON = (
    CALL_ONCE
    + """
import subprocess
child = subprocess.Popen(["sleep", "600"], start_new_session=True)  # a session of its own
open(os.environ["PID_FILE"], "w").write(str(child.pid))
"""
)


ESCAPING_DAEMON = (
    CALL_ONCE
    + """
import time
if os.fork() == 0:  # the classic daemon: fork, setsid, fork again, close every pipe
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 1024)
        open(os.environ["PID_FILE"] + ".tmp", "w").write(str(os.getpid()))
        os.rename(os.environ["PID_FILE"] + ".tmp", os.environ["PID_FILE"])
        time.sleep(600)
    os._exit(0)
os.wait()
while not os.path.exists(os.environ["PID_FILE"]):
    time.sleep(0.01)
"""
)

FORKING_DAEMON = (
    CALL_ONCE
    + """
import time
if os.fork() == 0:  # a daemon that keeps forking children (each a sleeper) while it lives
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 1024)
        for _ in range(500):
            child = os.fork()
            if child == 0:
                time.sleep(600)
                os._exit(0)
            with open(os.environ["PID_FILE"] + ".all", "a") as pids:
                pids.write(f"{child}\\n")
            if not os.path.exists(os.environ["PID_FILE"]):
                open(os.environ["PID_FILE"] + ".tmp", "w").write(str(os.getpid()))
                os.rename(os.environ["PID_FILE"] + ".tmp", os.environ["PID_FILE"])
            time.sleep(0.002)
        time.sleep(600)
    os._exit(0)
os.wait()
while not os.path.exists(os.environ["PID_FILE"]):
    time.sleep(0.01)
"""
)


@pytest.mark.parametrize(
    ("source", "settings", "reason"),
    [
        ("import sys; sys.exit(3)", {}, "harness_error"),
        (CALL_ONCE + "raise SystemExit('crashed after the call')", {}, "harness_error"),
        (HANG, {"rollout_timeout": 1.0}, "rollout_timeout"),
        ("print('no model needed')", {}, "no_model_call"),
        (CALL_ONCE.replace('os.environ["OPENAI_MODEL"]', '"gpt-4o"'), {}, "wrong_model"),
        (
            CALL_ONCE + CALL_ONCE.split("client = OpenAI()")[1],
            {"max_turns": 1},
            "max_turns_exceeded",
        ),
        (CALL_ONCE, {"max_sampled_tokens": 2}, "output_exceeded"),
        (
            "import sys\nwhile True: sys.stdout.write('x' * 65536)",
            {"max_stdout_bytes": 1000},
            "stdout_exceeded",
        ),
        (CHILD, {}, "leftover_process"),
        (DAEMON, {}, "leftover_process"),
        (ESCAPING_DAEMON, {}, "leftover_process"),
    ],
    ids=[
        "crash",
        "crash-after-call",
        "hang",
        "never-calls",
        "other-model",
        "call-budget",
        "token-budget",
        "flood",
        "children",
        "daemon-holding-the-pipes",
        "daemon-closing-the-pipes",
    ],
)
async def test_misbehaving_programs_settle(
    tmp_path: Path,
    upstream: MockModelServer,
    source: str,
    settings: dict[str, Any],
    reason: str,
) -> None:
    pid_file = tmp_path / "pid"
    env = program_env(tmp_path, source, program_env={"PID_FILE": str(pid_file)}, **settings)
    group = await collect_group(env, [request(upstream, "a"), request(upstream, "b")])
    assert [t.termination_reason for t in group.trajectories] == [reason, reason]
    assert all(t.rewards == {"said": 0.0} for t in group.trajectories)
    if pid_file.exists():  # the hanging program, or the child it left: killed
        assert not _pid_alive(int(pid_file.read_text()))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="found through /proc")
async def test_forking_daemon_and_all_its_children_are_killed(
    tmp_path: Path, upstream: MockModelServer
) -> None:
    pid_file = tmp_path / "pid"
    env = program_env(tmp_path, FORKING_DAEMON, program_env={"PID_FILE": str(pid_file)})
    trajectory = await run_one(env, upstream)
    assert (trajectory.termination_reason, trajectory.rewards) == (
        "leftover_process",
        {"said": 0.0},
    )
    daemon = int(pid_file.read_text())
    assert not _pid_alive(daemon)
    # every child it forked, including any forked while it was being killed
    children = [int(line) for line in Path(f"{pid_file}.all").read_text().split()]
    assert children and not any(_pid_alive(pid) for pid in children)


MARKED = """
import json, os, subprocess, sys
from openai import OpenAI
json.load(sys.stdin)
OpenAI().chat.completions.create(
    model=os.environ["OPENAI_MODEL"], messages=[{"role": "user", "content": "x"}]
)
subprocess.run(["sleep", "0.1"], check=True)  # a child it waits for: nothing is left
print(os.environ["BENCHMAX_ROLLOUT_PROCESS"])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="found through /proc")
async def test_well_behaved_program_and_other_processes_are_unaffected(
    tmp_path: Path, upstream: MockModelServer
) -> None:
    markers: list[str] = []

    class Reading(ProgramEnv):
        async def compute_reward(self, rollout: AgentRollout) -> dict[str, float]:
            markers.append(rollout.agent.stdout.strip())
            return {"said": 1.0}

    script = tmp_path / "marked.py"
    script.write_text(MARKED)
    env = type("M", (Reading,), {"command": (sys.executable, str(script))})()
    # a process of ours started beside the rollouts, with a marker of its own: not theirs
    bystander = await asyncio.create_subprocess_exec(
        "sleep", "600", env={**os.environ, "BENCHMAX_ROLLOUT_PROCESS": "0" * 32}
    )
    try:
        group = await collect_group(env, [request(upstream, "a"), request(upstream, "b")])
        assert [t.termination_reason for t in group.trajectories] == ["finished", "finished"]
        assert _pid_alive(bystander.pid)
    finally:
        bystander.kill()
        await bystander.wait()
    # each run its own random marker, not the API key
    assert len(set(markers)) == 2 and all(len(marker) == 32 for marker in markers)
    assert all(int(marker, 16) >= 0 for marker in markers)


async def test_program_cannot_start_is_harness_error(upstream: MockModelServer) -> None:
    class Missing(ProgramEnv):
        command = ("/nonexistent/agent-program",)

    rollout = await Missing().run_rollout(request(upstream))
    assert rollout.termination_reason == "harness_error"


async def test_env_without_command_is_a_contract_error(upstream: MockModelServer) -> None:
    with pytest.raises(TypeError, match="must set command or override run_agent"):
        await ProgramEnv().run_rollout(request(upstream))


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"command": "python agent.py"}, TypeError, "command must be a sequence of arguments"),
        ({"command": ("{python}", 3)}, TypeError, "command must be a sequence of arguments"),
        ({"max_stdout_bytes": -1}, ValueError, "max_stdout_bytes must be a positive integer"),
        ({"max_stdout_bytes": "1MB"}, ValueError, "max_stdout_bytes must be a positive integer"),
        ({"max_stderr_bytes": -1}, ValueError, "max_stderr_bytes must be a non-negative integer"),
        ({"max_sampled_tokens": 0}, ValueError, "max_sampled_tokens must be a positive integer"),
        ({"program_env": {"X": 1}}, TypeError, "program_env must map names to strings"),
        ({"program_env": ["X"]}, TypeError, "program_env must map names to strings"),
        ({"keep_workdirs": "yes"}, TypeError, "keep_workdirs must be True or False"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_bad_settings_fail_at_construction(
    settings: dict[str, Any], error: type[Exception], message: str
) -> None:
    bad = type("Bad", (ProgramEnv,), {"command": ("{python}", "-c", "pass"), **settings})
    with pytest.raises(error, match=message):
        bad()


ENVIRONMENT = """
import json, os, sys
print(json.dumps(dict(os.environ)))
from openai import OpenAI
MESSAGES = [{"role": "user", "content": "x"}]
OpenAI().chat.completions.create(model=os.environ["OPENAI_MODEL"], messages=MESSAGES)
"""


async def test_program_never_sees_the_upstream_key(
    tmp_path: Path, upstream: MockModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_PROVIDER_KEY", UPSTREAM_KEY)
    stdout: list[str] = []

    class Dumping(ProgramEnv):
        async def compute_reward(self, rollout: AgentRollout) -> dict[str, float]:
            stdout.append(rollout.agent.stdout)
            return {"said": 0.0}

    script = tmp_path / "dump.py"
    script.write_text(ENVIRONMENT)
    env = type("D", (Dumping,), {"command": (sys.executable, str(script))})()
    rollout = await env.run_rollout(request(upstream))
    assert rollout.termination_reason == "finished"
    assert UPSTREAM_KEY not in stdout[0]
    assert "OPENAI_API_KEY" in stdout[0] and "MY_PROVIDER_KEY" not in stdout[0]
    assert upstream.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


DIES_MID_CALL = """
import json, os, sys, threading, time, urllib.request
json.load(sys.stdin)
body = {"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": "x"}]}
call = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"},
)
threading.Thread(target=urllib.request.urlopen, args=(call,), daemon=True).start()
while not os.path.exists(os.environ["CALLED"]):  # the upstream has the call
    time.sleep(0.01)
os._exit(1)
"""


async def test_program_that_dies_mid_call_does_not_wait_for_the_upstream(
    tmp_path: Path,
) -> None:
    called = tmp_path / "called"
    release = asyncio.Event()

    async def never_answers(body: dict[str, Any]) -> str:
        called.write_text("yes")
        await release.wait()  # an upstream that is slow: the rollout must not wait for it
        return "late"

    env = program_env(tmp_path, DIES_MID_CALL, program_env={"CALLED": str(called)})
    async with MockModelServer(never_answers, tokens=True) as server:
        try:
            # far above the ~1 s it needs, far below aiohttp's 60 s wait for in-flight calls
            async with asyncio.timeout(40):
                rollout = await env.run_rollout(request(server))
        finally:
            release.set()
    assert (rollout.termination_reason, rollout.rewards) == ("harness_error", {"said": 0.0})
    assert called.exists() and not rollout.agent.calls
