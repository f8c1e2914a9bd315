"""``benchmax serve --protocol nemo-gym`` as a NeMo-Gym agent drives it: seed, tools,
verify; rewards equal a local run, and nemo-gym's own models validate every reply.

nemo-gym cannot share the project's environment (0.4, the newest release whose
``Requires-Python`` admits 3.12, pins ``openai<=2.7.2`` and ``mcp<2``): its models run in
an isolated ``uv run --with nemo-gym==0.4.0`` interpreter (``nemo_gym_check.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.serving.conftest import CALCULATOR, QUICKSTART, Example, Policy, local_rewards, served

from benchmax.serving import RunningServer
from benchmax.testing import MockModelServer

NEMO_GYM = "nemo-gym==0.4.0"
CHECK = Path(__file__).with_name("nemo_gym_check.py")
MAX_STEPS = 8
EMPTY_VERIFY = b'{"responses_create_params": {}, "response": {"output": []}}'


def chat_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": item["role"], "content": item["content"]} for item in items]


def response_object(output: list[dict[str, Any]], tools: list[Any]) -> dict[str, Any]:
    return {
        "id": "resp_test",
        "created_at": 0,
        "model": "mock-model",
        "object": "response",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": tools,
    }


async def agent_episode(
    http: httpx.AsyncClient,
    server: RunningServer,
    policy: Policy,
    row: dict[str, Any],
    name: str,
    recorded: dict[str, list[Any]],
) -> dict[str, Any]:
    """What NeMo-Gym's simple agent does: seed, model turns with tool calls through the
    resources server, then verify (cookies carried throughout)."""
    seed = await http.post(server.base_url + "/seed_session", json=row)
    assert seed.status_code == 200, seed.text
    recorded["seed_responses"].append(seed.json())
    cookies = {"Cookie": f"benchmax_session={seed.cookies['benchmax_session']}"}
    params = row["responses_create_params"]
    chat_tools = [
        {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
        for t in params.get("tools", [])
    ]
    history = chat_messages(params["input"])
    output: list[dict[str, Any]] = []
    for step in range(MAX_STEPS):
        message = (await policy.act(f"{name}.r0", history, chat_tools))["message"]
        history.append(message)
        calls = message.get("tool_calls") or []
        if message.get("content"):
            output.append(
                {
                    "id": f"msg_{step}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": message["content"], "annotations": []}
                    ],
                }
            )
        if not calls:
            break
        for call in calls:
            function = call["function"]
            output.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                    "status": "completed",
                }
            )
            result = await http.post(
                f"{server.base_url}/{function['name']}",
                content=function["arguments"],
                headers=cookies,
            )
            text = result.text  # any answer is the tool's output for the model
            output.append({"type": "function_call_output", "call_id": call["id"], "output": text})
            history.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    verify_request = {**row, "response": response_object(output, params.get("tools", []))}
    recorded["verify_requests"].append(verify_request)
    verify = await http.post(server.base_url + "/verify", json=verify_request, headers=cookies)
    assert verify.status_code == 200, verify.text
    recorded["verify_responses"].append(verify.json())
    return verify.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("example", [QUICKSTART, CALCULATOR], ids=lambda e: e.name)
async def test_a_nemo_gym_agent_gets_the_local_rewards(
    example: Example, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    count = 6
    expected = await local_rewards(example, tmp_path, count)
    recorded: dict[str, Any] = {"seed_responses": [], "verify_requests": [], "verify_responses": []}
    async with MockModelServer(example.policy(), record=False) as mock:
        policy = Policy(mock, http)
        async with served(example, mock, protocol="nemo-gym") as server:
            listing = await http.get(server.base_url + "/examples")
            rows = [json.loads(line) for line in listing.text.splitlines()][:count]
            recorded["rows"] = rows
            verdicts = [
                await agent_episode(http, server, policy, row, f"agent-{i}", recorded)
                for i, row in enumerate(rows)
            ]
            aggregate = await http.post(
                server.base_url + "/aggregate_metrics", json={"verify_responses": verdicts}
            )
            recorded["aggregate"] = aggregate.json()
            assert server.sessions.active == 0
    got = {row["example_id"]: v["reward_components"] for row, v in zip(rows, verdicts, strict=True)}
    assert got == expected
    for verdict in verdicts:
        assert verdict["reward"] == pytest.approx(sum(verdict["reward_components"].values()))
        for key, value in verdict["reward_components"].items():
            assert verdict[key] == value
    record = tmp_path / "nemo_gym_replies.json"
    record.write_text(json.dumps(recorded), encoding="utf-8")
    check_with_nemo_gym(record)


def check_with_nemo_gym(record: Path) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")  # uv run sets UV to its own binary
    assert uv is not None, "uv runs nemo-gym's models in their own environment"
    command = [uv, "run", "--isolated", "--no-project", "--python", sys.executable,
               "--with", NEMO_GYM, "python", str(CHECK), str(record)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("ok ")


async def test_bad_nemo_gym_input_gets_fastapi_style_errors(http: httpx.AsyncClient) -> None:
    async with MockModelServer(CALCULATOR.policy(), record=False) as mock:
        async with served(CALCULATOR, mock, protocol="nemo-gym", max_sessions=1) as server:
            base = server.base_url
            cases = [
                ("/seed_session", b"{no", 400, "not JSON"),
                ("/seed_session", b'{"example_id": "missing"}', 400, "no example"),
                ("/seed_session", b'{"seed": -1}', 400, "seed"),
                ("/seed_session", b'{"resources_session_id": "r", "task_id": 5}', 400,
                 "task_id must be the example id"),
                ("/seed_session", b'{"resources_session_id": "r", "task_id": ""}', 400,
                 "task_id must be the example id"),
                ("/seed_session", b'{"resources_session_id": "r", "task_id": "missing"}', 400,
                 "no example"),
                ("/seed_session", b'{"resources_session_id": "' + b"r" * 256 + b'"}', 400,
                 "resources_session_id must be a non-empty string of at most 255 characters"),
                ("/add", b'{"a": 1, "b": 2}', 400, "no live session"),
                ("/verify", b"{}", 400, "responses_create_params"),
                ("/verify", EMPTY_VERIFY, 400, "no live session"),
                ("/close_session", b"{}", 400, "resources_session_id"),
                ("/aggregate_metrics", b'{"verify_responses": 3}', 400, "verify_responses"),
                ("/verify_not_a_tool", b"{}", 400, "no live session"),
            ]  # fmt: skip
            for route, body, status, text in cases:
                reply = await http.post(base + route, content=body)
                assert reply.status_code == status, (route, reply.text)
                assert text in reply.json()["detail"], (route, reply.text)
                assert "Traceback" not in reply.text
            seeded = await http.post(base + "/seed_session", json={"seed": 0})
            assert seeded.status_code == 200
            cookies = {"Cookie": f"benchmax_session={seeded.cookies['benchmax_session']}"}
            busy = await http.post(base + "/seed_session", json={"seed": 1})
            assert busy.status_code == 503 and "capacity" in busy.json()["detail"]
            unknown = await http.post(base + "/power", json={"a": 1}, headers=cookies)
            assert unknown.status_code == 404 and "no tool named" in unknown.json()["detail"]
            new_style = await http.post(
                base + "/close_session", json={"resources_session_id": "r-1", "episode_id": "e"}
            )
            assert new_style.json() == {"resources_session_id": "r-1"}
            assert (await http.get(base + "/reverify_mode")).json() == "unsupported"


async def test_a_simulated_user_who_answers_the_final_message_makes_verify_unfinished(
    http: httpx.AsyncClient,
) -> None:
    from tests.serving.conftest import SUPPORT_CHAT

    async with MockModelServer(SUPPORT_CHAT.policy(), record=False) as mock:
        async with served(SUPPORT_CHAT, mock, protocol="nemo-gym") as server:
            row = json.loads((await http.get(server.base_url + "/examples")).text.splitlines()[0])
            seeded = await http.post(server.base_url + "/seed_session", json=row)
            cookie = {"Cookie": f"benchmax_session={seeded.cookies['benchmax_session']}"}
            ask = {
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Your order number?", "annotations": []}
                ],
            }
            request = {**row, "response": response_object([ask], [])}
            verdict = await http.post(server.base_url + "/verify", json=request, headers=cookie)
            assert server.sessions.active == 0
    body = verdict.json()
    assert body["termination_reason"] == "unfinished" and body["reward"] == 0.0
    assert set(body["reward_components"]) == set(SUPPORT_CHAT.env(mock.base_url).reward_keys)
    assert "simulated user" in body["failure_reason"]


BIG = 12345678901234567890123456789  # past 64 bits: orjson alone reads it as a float


async def test_integers_past_64_bits_reach_the_tool_exactly(http: httpx.AsyncClient) -> None:
    """A tool's integer arguments are read as a local run reads a model's arguments
    (``json``): exact, not rounded through a double."""
    async with MockModelServer(CALCULATOR.policy(), record=False) as mock:
        async with served(CALCULATOR, mock, protocol="nemo-gym") as server:
            seeded = await http.post(server.base_url + "/seed_session", json={"seed": 0})
            cookie = {"Cookie": f"benchmax_session={seeded.cookies['benchmax_session']}"}
            for a, b in ((BIG, 1), (-(2**63) - 1, 0)):
                body = f'{{"a": {a}, "b": {b}}}'.encode()
                added = await http.post(server.base_url + "/add", content=body, headers=cookie)
                assert added.status_code == 200, added.text
                assert json.loads(added.text) == {"result": a + b}
            body = f'{{"responses_create_params": {{"n": {BIG}}}, "response": {{"output": []}}}}'
            verdict = await http.post(
                server.base_url + "/verify", content=body.encode(), headers=cookie
            )
            assert verdict.status_code == 200, verdict.text
            assert json.loads(verdict.text)["responses_create_params"] == {"n": BIG}
