"""OpenEnvEnv against OpenEnv servers built with openenv-core's own server classes."""

from __future__ import annotations

import json
import logging
import pickle
import re
import socket
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from tests.sources.running import run_config

from benchmax.runner import run_environment
from benchmax.sources.openenv import OpenEnvEnv
from benchmax.testing import MockModelServer, RecordedRequest, message_text
from benchmax.trajectory import Trajectory

pytest.importorskip("openenv.core")

from examples.openenv_guess.policy import guess
from openenv.core import GenericEnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import Action, Observation
from pydantic import Field
from tests.sources.openenv_servers import (
    MAX_GUESSES,
    CalculatorEnvironment,
    GuessAction,
    GuessEnvironment,
    GuessObservation,
)


def guess_app(max_sessions: int = 16) -> Any:
    return create_app(
        GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=max_sessions
    )


def replayed_reward(seed: int, guesses: list[str]) -> float:
    """The reward openenv's own environment gives these guesses, played directly."""
    environment = GuessEnvironment()
    environment.reset(seed=seed)
    total = 0.0
    for reply in guesses:
        observation = environment.step(GuessAction(message=reply))
        total += observation.reward or 0.0
        if observation.done:
            break
    return total


async def test_episodes_play_over_the_websocket_and_rewards_are_the_servers(
    serve_openenv: Any,
) -> None:
    url = await serve_openenv(guess_app())
    env = OpenEnvEnv(url, episodes=4, seed=5)
    groups: list[tuple[Trajectory, ...]] = []
    async with MockModelServer(guess) as mock:
        report = await run_environment(env, run_config(mock), on_group=groups.append)
    assert report.rollouts_by_reason == {"finished": 8}
    seeds = {
        example.id: example.payload["openenv"]["reset"]["seed"]
        for example in await env.create_dataset("train", Path("."))
    }
    for group in groups:
        for trajectory in group:
            messages = trajectory.messages
            first = json.loads(message_text(messages[0]["content"]))
            assert first == {
                "prompt": "Guess my number from 1 to 20. Reply with the number only.",
                "feedback": "",
            }
            assert all(m.get("simulated_user") for m in messages[1:] if m["role"] == "user")
            guesses = [
                re.sub(r"<think>.*?</think>", "", message_text(m["content"]))
                for m in messages
                if m["role"] == "assistant"
            ]
            assert trajectory.rewards == {
                "reward": pytest.approx(replayed_reward(seeds[trajectory.example_id], guesses))
            }
            assert json.loads(message_text(messages[-2]["content"]))["feedback"] != "correct"
    assert len({json.dumps(g[0].rewards) for g in groups}) > 1  # episodes differ by seed


async def test_an_episode_the_turns_do_not_finish_is_max_turns_exceeded(serve_openenv: Any) -> None:
    url = await serve_openenv(guess_app())
    env = OpenEnvEnv(url, episodes=1, max_turns=MAX_GUESSES - 1)
    async with MockModelServer(lambda body, request: "0") as mock:
        report = await run_environment(env, run_config(mock, group_size=1))
    assert report.rollouts_by_reason == {"max_turns_exceeded": 1}
    assert report.reward_stats["reward"].max == 0.0


@pytest.mark.filterwarnings("ignore:Accessing `Tool.inputSchema` is deprecated")  # openenv-core's
async def test_mcp_tools_are_the_models_tools_and_each_call_is_a_step(serve_openenv: Any) -> None:
    url = await serve_openenv(
        create_app(CalculatorEnvironment, Action, Observation, max_concurrent_envs=8)
    )

    def calculator(body: dict[str, Any], request: RecordedRequest) -> Any:
        task = json.loads(message_text(body["messages"][0]["content"]))["task"]
        a, b = (int(n) for n in re.findall(r"\d+", task)[:2])
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}
        if len(results) == 1:
            answer = int(results[0]) + (1 if request.session.endswith(".r1") else 0)
            return {
                "content": None,
                "tool_calls": [{"name": "finish", "arguments": {"answer": answer}}],
            }
        return "submitted"

    env = OpenEnvEnv(url, episodes=2, mcp_tools=True)
    groups: list[tuple[Trajectory, ...]] = []
    async with MockModelServer(calculator) as mock:
        report = await run_environment(env, run_config(mock), on_group=groups.append)
        tools = mock.requests[0].body["tools"]
    assert {tool["function"]["name"] for tool in tools} == {"add", "finish"}
    assert report.rollouts_by_reason == {"finished": 4}
    for group in groups:
        right, wrong = group
        assert right.rewards == {"reward": 1.0} and wrong.rewards == {"reward": 0.0}
        [added, finished] = [m for m in right.messages if m["role"] == "tool"]
        task = json.loads(message_text(right.messages[0]["content"]))["task"]
        assert int(added["content"]) == sum(int(n) for n in re.findall(r"\d+", task)[:2])
        assert finished["content"] == "submitted"


async def test_a_server_at_capacity_or_gone_settles_as_setup_error(
    serve_openenv: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = await serve_openenv(guess_app(max_sessions=1))
    async with GenericEnvClient(base_url=url) as holder:  # takes the only session
        await holder.reset(seed=1)
        env = OpenEnvEnv(url, episodes=1)
        with caplog.at_level(logging.ERROR, logger="benchmax.sources.openenv"):
            async with MockModelServer(lambda body, request: "3") as mock:
                report = await run_environment(env, run_config(mock, group_size=1))
    assert report.rollouts_by_reason == {"setup_error": 1}
    assert "reset: the server answered CAPACITY_REACHED" in caplog.text
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    gone = OpenEnvEnv(closed, episodes=1, message_field="message", connect_timeout=30)
    async with MockModelServer(lambda body, request: "3") as mock:
        report = await run_environment(gone, run_config(mock, group_size=1))
        assert mock.requests == []  # the model is never called
    assert report.rollouts_by_reason == {"setup_error": 1}


async def test_a_step_the_server_refuses_settles_as_environment_error(serve_openenv: Any) -> None:
    url = await serve_openenv(guess_app())
    env = OpenEnvEnv(url, episodes=1, message_field="guess")  # GuessAction has no 'guess'
    async with MockModelServer(lambda body, request: "3") as mock:
        report = await run_environment(env, run_config(mock, group_size=1))
    assert report.rollouts_by_reason == {"environment_error": 1}


class TwoFieldAction(Action):
    word: str = Field(...)
    count: int = Field(...)


async def test_an_action_without_one_text_field_needs_message_field(
    serve_openenv: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = await serve_openenv(create_app(GuessEnvironment, TwoFieldAction, GuessObservation))
    with caplog.at_level(logging.ERROR, logger="benchmax.sources.openenv"):
        async with MockModelServer(lambda body, request: "3") as mock:
            report = await run_environment(
                OpenEnvEnv(url, episodes=1), run_config(mock, group_size=1)
            )
    assert report.rollouts_by_reason == {"setup_error": 1}
    assert "no single text field (fields: word, count): pass message_field" in caplog.text


async def test_observation_field_picks_the_text_and_action_args_join_the_action(
    serve_openenv: Any,
) -> None:
    url = await serve_openenv(guess_app())
    env = OpenEnvEnv(url, episodes=1, observation_field="prompt", system_prompt="Play well.")
    async with MockModelServer(lambda body, request: "10") as mock:
        await run_environment(env, run_config(mock, group_size=1, max_examples=1))
        first = mock.requests[0].body["messages"]
    assert first == [
        {"role": "system", "content": "Play well."},
        {"role": "user", "content": "Guess my number from 1 to 20. Reply with the number only."},
    ]
    missing = OpenEnvEnv(url, episodes=1, observation_field="nope")
    async with MockModelServer(lambda body, request: "10") as mock:
        report = await run_environment(missing, run_config(mock, group_size=1))
    assert report.rollouts_by_reason == {"setup_error": 1}


async def test_ids_are_the_reset_arguments_and_the_env_pickles() -> None:
    env = OpenEnvEnv(
        "ws://127.0.0.1:9/", episodes=3, eval_episodes=2, seed=4, reset_args={"level": 2}
    )
    train = await env.create_dataset("train", Path("."))
    again = await OpenEnvEnv(
        "http://other:1", episodes=3, seed=4, reset_args={"level": 2}
    ).create_dataset("train", Path("."))
    assert [e.id for e in train] == [e.id for e in again]  # the server's address is not identity
    evaluation = await env.create_dataset("eval", Path("."))
    assert len(evaluation) == 2 and not {e.id for e in train} & {e.id for e in evaluation}
    assert train[0].payload["openenv"] == {"reset": {"seed": 4, "level": 2}}
    copy = pickle.loads(cloudpickle.dumps(env))
    assert copy.base_url == "ws://127.0.0.1:9" and copy.reset_args == {"level": 2}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"base_url": "127.0.0.1:8000"},
            "base_url '127.0.0.1:8000' must be an http(s):// or ws(s)://",
        ),
        ({"base_url": 8000}, "base_url must be a URL string"),
        ({"base_url": "http://h", "episodes": 0}, "episodes must be an integer from 1"),
        ({"base_url": "http://h", "seed": -2}, "seed must be a non-negative integer"),
        ({"base_url": "http://h", "reset_args": {"seed": 1}}, "reset_args must not set 'seed'"),
        ({"base_url": "http://h", "reset_args": [1]}, "reset_args must be a JSON object"),
        ({"base_url": "http://h", "action_args": {"x": float("nan")}}, "action_args must be JSON"),
        ({"base_url": "http://h", "message_field": ""}, "message_field must be a field name"),
        ({"base_url": "http://h", "mcp_tools": "yes"}, "mcp_tools must be True or False"),
        ({"base_url": "http://h", "step_timeout": 0}, "step_timeout must be a positive number"),
        ({"base_url": "http://h", "max_turns": 0}, "max_turns must be a positive integer"),
    ],
)
def test_a_bad_constructor_argument_is_one_error_naming_it(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises((ValueError, TypeError)) as raised:
        OpenEnvEnv(**arguments)
    assert message in str(raised.value) and "\n" not in str(raised.value)


async def test_a_hung_step_settles_after_step_timeout_without_waiting_on_close() -> None:
    """The server answers the reset, then never answers the step nor reads again (so no
    close handshake either): the rollout settles after step_timeout plus a bounded
    close, not after the polite close's 10 s and websockets' own 10 s more."""
    import asyncio
    import time

    from aiohttp import web

    stepped = asyncio.Event()

    async def hung(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.receive()  # the reset
        observation = {"observation": {"prompt": "guess"}, "reward": None, "done": False}
        await ws.send_json({"type": "observation", "data": observation})
        await ws.receive()  # the step
        stepped.set()
        await asyncio.sleep(3600)
        return ws

    app = web.Application()
    app.router.add_get("/ws", hung)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    env = OpenEnvEnv(url, episodes=1, message_field="message", step_timeout=2)
    try:
        async with MockModelServer(lambda body, request: "3") as mock:
            started = time.monotonic()
            report = await run_environment(env, run_config(mock, group_size=1))
            elapsed = time.monotonic() - started
    finally:
        await runner.cleanup()
    assert stepped.is_set()
    assert report.rollouts_by_reason == {"environment_error": 1}
    # 2 s of step_timeout + at most 1 s of close handshake; before: about 23 s
    assert elapsed < 15.0, elapsed
