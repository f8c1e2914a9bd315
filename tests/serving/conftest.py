"""Served examples, their mock policies, and a local run of the same policy to compare."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.envs import Environment
from benchmax.results import read_results
from benchmax.runner import RunConfig, run_environment
from benchmax.serving import RunningServer, ServeOptions, serving
from benchmax.testing import MockModelServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MOCK_KEY = "benchmax-serve-test-key"


def load_module(path: Path) -> ModuleType:
    name = f"serve_test_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Example:
    """One example folder: how to build its env (given the mock's URL) and its policy."""

    name: str
    class_name: str
    policy_name: str
    args: Callable[[str], dict[str, Any]] = lambda url: {}

    @property
    def folder(self) -> Path:
        return EXAMPLES / self.name

    def env(self, mock_url: str) -> Environment[Any, Any]:
        module = load_module(self.folder / "env.py")
        return getattr(module, self.class_name)(**self.args(mock_url))  # type: ignore[no-any-return]

    def policy(self) -> Any:
        return getattr(load_module(self.folder / "policy.py"), self.policy_name)


QUICKSTART = Example("quickstart", "QuickStartEnv", "reply")
CALCULATOR = Example("calculator", "CalculatorEnv", "solve")
SUPPORT_CHAT = Example(
    "support_chat", "SupportChatEnv", "respond", lambda url: {"judge_base_url": url}
)
PROVIDERS = {"judge": StaticBearerAuth(MOCK_KEY), "user": StaticBearerAuth(MOCK_KEY)}


@contextlib.asynccontextmanager
async def served(
    example: Example, mock: MockModelServer, **options: Any
) -> AsyncIterator[RunningServer]:
    env = example.env(mock.base_url)
    settings = {
        "port": 0,
        "split": "eval",
        "base_dir": example.folder,
        "auth_providers": PROVIDERS,
        **options,
    }
    try:
        async with serving(env, ServeOptions(**settings)) as server:
            yield server
    finally:
        await env.aclose()


async def local_rewards(
    example: Example, tmp_path: Path, count: int
) -> dict[str, dict[str, float]]:
    """Example id -> reward map of a local run (group size 1) with the example's policy."""
    async with MockModelServer(example.policy(), record=False) as mock:
        env = example.env(mock.base_url)
        try:
            output = tmp_path / f"local-{example.name}.jsonl"
            await run_environment(
                env,
                RunConfig(
                    model="mock-model",
                    base_url=mock.session_url("{rollout_id}"),
                    auth_providers=PROVIDERS,
                    split="eval",
                    base_dir=example.folder,
                    group_size=1,
                    max_examples=count,
                    output=output,
                    judge_check=False,
                ),
            )
        finally:
            await env.aclose()
    return {r.example_id: dict(r.rewards) for r in read_results(output).rollouts}


class Policy:
    """The example's mock policy behind real HTTP: the action for a conversation."""

    def __init__(self, mock: MockModelServer, client: httpx.AsyncClient) -> None:
        self.mock = mock
        self.client = client

    async def act(self, session: str, messages: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": "mock-model", "messages": messages}
        if tools:
            body["tools"] = tools
        response = await self.client.post(
            self.mock.session_url(session) + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {MOCK_KEY}"},
        )
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        return {"message": {k: v for k, v in message.items() if v is not None or k == "content"}}


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60.0) as client:
        yield client
