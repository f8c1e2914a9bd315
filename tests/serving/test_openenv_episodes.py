"""openenv-core's own client drives whole served episodes; rewards match a local run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.env_server.types import ResetRequest, ResetResponse, StepRequest, StepResponse
from openenv.core.generic_client import GenericEnvClient
from tests.serving.conftest import CALCULATOR, QUICKSTART, SUPPORT_CHAT, Example, Policy, served

from benchmax.testing import MockModelServer

CASES = [(QUICKSTART, 6), (CALCULATOR, 6), (SUPPORT_CHAT, 3)]


async def ws_episode(base_url: str, policy: Policy, seed: int) -> dict[str, Any]:
    async with GenericEnvClient(base_url=base_url, message_timeout_s=120.0) as client:
        result = await client.reset(seed=seed)
        observation = result.observation
        history = list(observation["messages"])
        tools = observation["tools"]
        assert result.done is False and result.reward is None
        while not result.done:
            action = await policy.act(f"ws-{seed}.r0", history, tools)
            history.append(action["message"])
            result = await client.step(action)
            history.extend(result.observation["messages"])
        final = result.observation
        assert result.reward == pytest.approx(sum(final["rewards"].values()))
        return {"example_id": observation["example_id"], **final}


async def http_episode(
    client: httpx.AsyncClient, base_url: str, policy: Policy, seed: int
) -> dict[str, Any]:
    request = ResetRequest(seed=seed)
    reply = await client.post(f"{base_url}/reset", json=request.model_dump(exclude_none=True))
    assert reply.status_code == 200, reply.text
    result: ResetResponse | StepResponse = ResetResponse.model_validate(reply.json())
    episode_id = result.observation["episode_id"]
    example_id = result.observation["example_id"]
    history = list(result.observation["messages"])
    tools = result.observation["tools"]
    while not result.done:
        action = await policy.act(f"http-{seed}.r0", history, tools)
        history.append(action["message"])
        step = StepRequest(action=action, episode_id=episode_id)  # type: ignore[call-arg]
        reply = await client.post(f"{base_url}/step", json=step.model_dump(exclude_none=True))
        assert reply.status_code == 200, reply.text
        result = StepResponse.model_validate(reply.json())
        history.extend(result.observation["messages"])
    return {"example_id": example_id, **result.observation}


@pytest.mark.parametrize(("example", "count"), CASES, ids=lambda c: getattr(c, "name", str(c)))
async def test_served_episodes_reward_like_a_local_run(
    example: Example, count: int, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    from tests.serving.conftest import local_rewards

    expected = await local_rewards(example, tmp_path, count)
    assert len(expected) == count
    async with MockModelServer(example.policy(), record=False) as mock:
        policy = Policy(mock, http)
        async with served(example, mock) as server:
            over_ws = [await ws_episode(server.base_url, policy, seed) for seed in range(count)]
            over_http = [
                await http_episode(http, server.base_url, policy, seed) for seed in range(count)
            ]
            assert server.sessions.active == 0
    for finals in (over_ws, over_http):
        assert {f["example_id"]: f["rewards"] for f in finals} == expected
        for final in finals:
            assert final["termination_reason"] in ("finished", "max_turns_exceeded")
            trajectory = final["trajectory"]
            assert trajectory["rollout_id"] and trajectory["example_id"] == final["example_id"]
            assert trajectory["rewards"] == final["rewards"]


async def test_tool_results_and_simulated_user_turns_are_observations(
    http: httpx.AsyncClient,
) -> None:
    """A calculator step returns the tool's result; a support-chat step the customer's turn."""
    async with MockModelServer(CALCULATOR.policy(), record=False) as mock:
        async with served(CALCULATOR, mock) as server:
            reply = (await http.post(f"{server.base_url}/reset", json={"seed": 0})).json()
            observation = reply["observation"]
            assert [t["function"]["name"] for t in observation["tools"]] == ["add", "multiply"]
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 40}'},
            }
            action = {"message": {"role": "assistant", "content": None, "tool_calls": [call]}}
            step = await http.post(
                f"{server.base_url}/step",
                json={"action": action, "episode_id": observation["episode_id"]},
            )
            messages = step.json()["observation"]["messages"]
            assert messages == [{"role": "tool", "tool_call_id": "c1", "content": '{"result":42}'}]
            assert step.json()["done"] is False
    async with MockModelServer(SUPPORT_CHAT.policy(), record=False) as mock:
        async with served(SUPPORT_CHAT, mock) as server:
            reply = (await http.post(f"{server.base_url}/reset", json={"seed": 0})).json()
            episode_id = reply["observation"]["episode_id"]
            action = {
                "message": {"role": "assistant", "content": "Could you give me your order number?"}
            }
            step = (
                await http.post(
                    f"{server.base_url}/step", json={"action": action, "episode_id": episode_id}
                )
            ).json()
            assert step["done"] is False
            [customer] = step["observation"]["messages"]
            assert customer["role"] == "user" and "order" in customer["content"]


async def test_the_same_seed_picks_the_same_example(http: httpx.AsyncClient) -> None:
    async with MockModelServer(QUICKSTART.policy(), record=False) as mock:
        async with served(QUICKSTART, mock) as server:
            ids = []
            for seed in (5, 5, 25, 6):
                reply = (await http.post(f"{server.base_url}/reset", json={"seed": seed})).json()
                ids.append(reply["observation"]["example_id"])
            named = (
                await http.post(f"{server.base_url}/reset", json={"example_id": ids[3]})
            ).json()
    assert ids[0] == ids[1] == ids[2]  # 25 = 5 + the 20 eval examples
    assert ids[3] != ids[0]
    assert named["observation"]["example_id"] == ids[3]
