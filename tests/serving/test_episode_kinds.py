"""Episodes of environments that are not BaseEnv, and episodes that record tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from tests.serving.conftest import QUICKSTART, served

from benchmax.envs import Dataset, Environment, Example, RolloutAttempt, RolloutRequest
from benchmax.serving import ServeOptions, serving
from benchmax.testing import MockModelServer

PROMPT = [{"role": "user", "content": "say hi"}]


class NoModelEnv(Environment[dict[str, Any], RolloutAttempt]):
    """Scores each example without ever calling a model."""

    reward_keys = ("length",)

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([Example(id="abc", payload={"word": "abc"})])

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        word = request.example.payload["word"]
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"length": float(len(word))},
        )


class OwnClientEnv(Environment[dict[str, Any], RolloutAttempt]):
    """Calls its model with its own HTTP client (as a harness would), twice."""

    reward_keys = ("said_hi",)

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([Example(id="hi", payload={})])

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        messages: list[Any] = list(PROMPT)
        async with httpx.AsyncClient(timeout=60.0) as client:
            for _ in range(2):
                reply = await client.post(
                    request.base_url + "/chat/completions",
                    json={"model": request.model, "messages": messages},
                )
                message = reply.json()["choices"][0]["message"]
                messages += [message, {"role": "user", "content": "again"}]
        said = all("hi" in str(m.get("content")) for m in messages if m["role"] == "assistant")
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"said_hi": float(said)},
        )

    async def compute_group_rewards(
        self, rollouts: Sequence[RolloutAttempt]
    ) -> Mapping[str, Any] | None:
        return None


async def test_an_environment_that_never_calls_a_model_is_done_at_reset() -> None:
    options = ServeOptions(port=0)
    async with serving(NoModelEnv(), options) as server:
        async with GenericEnvClient(base_url=server.base_url) as client:
            result = await client.reset()
        assert result.done is True and result.reward == 3.0
        assert result.observation["rewards"] == {"length": 3.0}
        assert result.observation["termination_reason"] == "finished"


async def test_an_environment_with_its_own_http_client_steps_through_the_bridge_url() -> None:
    async with serving(OwnClientEnv(), ServeOptions(port=0)) as server:
        async with GenericEnvClient(base_url=server.base_url) as client:
            result = await client.reset()
            assert result.observation["messages"] == PROMPT
            result = await client.step({"message": {"role": "assistant", "content": "hi"}})
            assert result.done is False
            assert result.observation["messages"] == [{"role": "user", "content": "again"}]
            result = await client.step({"message": {"role": "assistant", "content": "hi again"}})
        assert result.done is True and result.observation["rewards"] == {"said_hi": 1.0}


async def test_record_tokens_episodes_keep_the_actions_tokens(http: httpx.AsyncClient) -> None:
    async with MockModelServer(QUICKSTART.policy(), record=False) as mock:
        async with served(QUICKSTART, mock) as server:
            reset = await http.post(server.base_url + "/reset", json={"record_tokens": True})
            observation = reset.json()["observation"]
            assert observation["sampling_args"]["return_token_ids"] is True
            action = {
                "message": {"role": "assistant", "content": "<answer>x</answer>"},
                "prompt_token_ids": [1, 2, 3],
                "completion_token_ids": [7, 8],
                "logprobs": [-0.5, -0.25],
            }
            step = await http.post(
                server.base_url + "/step",
                json={"action": action, "episode_id": observation["episode_id"]},
            )
            final = step.json()["observation"]
            [call] = final["trajectory"]["model_calls"]
            assert call["prompt_token_ids"] == [1, 2, 3]
            assert call["completion_token_ids"] == [7, 8]
            assert call["completion_logprobs"] == [-0.5, -0.25]
            # without tokens, a record_tokens episode ends as a local run would
            again = await http.post(server.base_url + "/reset", json={"record_tokens": True})
            bare = {"message": {"role": "assistant", "content": "<answer>x</answer>"}}
            ended = await http.post(
                server.base_url + "/step",
                json={"action": bare, "episode_id": again.json()["observation"]["episode_id"]},
            )
            assert ended.json()["observation"]["termination_reason"] == "model_error"
            assert ended.json()["reward"] == 0.0


@pytest.mark.parametrize(
    ("ids", "shown"), [([True, 2], "True at index 0"), ([7, 1.0], "1.0 at index 1")]
)
async def test_action_token_ids_follow_the_local_runs_rule(
    http: httpx.AsyncClient, ids: list[object], shown: str
) -> None:
    async with MockModelServer(QUICKSTART.policy(), record=False) as mock:
        async with served(QUICKSTART, mock) as server:
            reset = await http.post(server.base_url + "/reset", json={"record_tokens": True})
            episode_id = reset.json()["observation"]["episode_id"]
            action = {
                "message": {"role": "assistant", "content": "<answer>x</answer>"},
                "prompt_token_ids": [1, 2, 3],
                "completion_token_ids": ids,
                "logprobs": [-0.5, -0.25],
            }
            step = await http.post(
                server.base_url + "/step", json={"action": action, "episode_id": episode_id}
            )
    assert step.status_code == 422
    assert f"completion_token_ids must hold integers in [0, 2**63), got {shown}" in step.text
