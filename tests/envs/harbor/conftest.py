"""Fixtures for the Harbor adapter tests: real task directories, configs and fakes.

Trials use Harbor's real ``Trial`` with the sandbox and agent steps replaced by
``harbor_fakes`` (no Docker, no network), or a stand-in ``Trial.create`` when a
test needs a scripted trial result or a raised exception.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from harbor.models.job.config import DatasetConfig
from harbor.models.trial.config import (
    AgentConfig,
    EnvironmentConfig,
    TaskConfig,
    TrialConfig,
    VerifierConfig,
)
from harbor.trial.trial import Trial
from tests.envs.harbor.harbor_fakes import AGENT_IMPORT_PATH, RECORDER, SANDBOX_IMPORT_PATH

from benchmax.auth import StaticBearerAuth
from benchmax.envs.harbor import HarborEnv, HarborTrialTemplate
from benchmax.envs.shared_types import Example, RolloutRequest

BEARER_TOKEN = "sk-bearer-secret-4242"
BASE_URL = "http://127.0.0.1:9/v1"


def write_task(
    directory: Path,
    *,
    instruction: str = "Solve the task.",
    rewards: Mapping[str, Any] | None = None,
    details: object | None = None,
) -> Path:
    """Create a valid Harbor task directory whose fake verifier reports ``rewards``."""
    (directory / "environment").mkdir(parents=True)
    (directory / "tests").mkdir()
    (directory / "task.toml").write_text(
        'schema_version = "1.3"\n\n[verifier]\ntimeout_sec = 30.0\n'
    )
    (directory / "instruction.md").write_text(instruction + "\n")
    (directory / "environment" / "Dockerfile").write_text("FROM scratch\n")
    (directory / "tests" / "test.sh").write_text("#!/bin/bash\necho scored\n")
    (directory / "tests" / "reward.json").write_text(json.dumps(dict(rewards or {"reward": 1.0})))
    if details is not None:
        (directory / "tests" / "reward-details.json").write_text(json.dumps(details))
    return directory


def write_dataset(root: Path, count: int, *, prefix: str = "task") -> Path:
    """Create ``count`` tasks with distinct instructions under ``root``."""
    for index in range(count):
        write_task(root / f"{prefix}-{index:02d}", instruction=f"{prefix} instruction {index}")
    return root


# A custom agent whose module imports a sibling relatively and reads an adjacent file.
AGENT_SOURCE = b"""
from pathlib import Path

from harbor.agents.base import BaseAgent

from .helper import GREETING


class CleanAgent(BaseAgent):
    def __init__(self, *args, suffix="", **kwargs):
        super().__init__(*args, **kwargs)
        self.greeting = GREETING + suffix
        self.resource = Path(__file__).with_name("resource.txt").read_text()

    @staticmethod
    def name():
        return "clean-agent"

    def version(self):
        return "1"

    async def setup(self, environment):
        return None

    async def run(self, instruction, environment, context):
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "bundled.txt").write_text(self.greeting + "|" + self.resource)


NotAnAgent = 42


class PlainClass:
    pass
"""


def agent_files(revision: str = "v1") -> dict[str, bytes]:
    return {
        "agent.py": AGENT_SOURCE,
        "helper.py": f"GREETING = 'hello-{revision}'\n".encode(),
        "resource.txt": f"resource-{revision}".encode(),
    }


@pytest.fixture
def harbor_recorder() -> Iterator[Any]:
    RECORDER.reset()
    yield RECORDER
    RECORDER.reset()


@pytest.fixture
def fake_sandbox() -> EnvironmentConfig:
    return EnvironmentConfig(import_path=SANDBOX_IMPORT_PATH)


@pytest.fixture
def make_template(
    tmp_path: Path, fake_sandbox: EnvironmentConfig
) -> Callable[..., HarborTrialTemplate]:
    def build(**overrides: Any) -> HarborTrialTemplate:
        agent_kwargs = overrides.pop("agent_kwargs", {})
        fields: dict[str, Any] = {
            "agent": AgentConfig(
                import_path=AGENT_IMPORT_PATH, env={"AGENT_SETTING": "kept"}, kwargs=agent_kwargs
            ),
            "environment": fake_sandbox,
            "verifier": VerifierConfig(),
            "trials_dir": tmp_path / "trials",
        }
        fields.update(overrides)
        return HarborTrialTemplate(**fields)

    return build


@pytest.fixture
def make_env(
    tmp_path: Path, make_template: Callable[..., HarborTrialTemplate]
) -> Callable[..., HarborEnv]:
    def build(**overrides: Any) -> HarborEnv:
        fields: dict[str, Any] = {
            "dataset": DatasetConfig(path=tmp_path / "unused-dataset"),
            "trial": make_template(),
            "reward_keys": ("reward",),
        }
        fields.update(overrides)
        return HarborEnv(**fields)

    return build


def make_request(
    rollout_id: str,
    payload: object,
    *,
    example_id: str = "example-1",
    model: str = "trainer-model",
    auth: Any = None,
) -> RolloutRequest[Any]:
    return RolloutRequest(
        rollout_id=rollout_id,
        example=Example(id=example_id, payload=payload),
        model=model,
        base_url=BASE_URL,
        model_auth=auth or StaticBearerAuth(BEARER_TOKEN),
    )


@pytest.fixture
def task_payload(tmp_path: Path) -> TaskConfig:
    return TaskConfig(path=write_task(tmp_path / "single-task"))


class ScriptedTrials:
    """A stand-in for ``Trial.create`` that records configs and replays scripted outcomes.

    Each outcome is a trial-result namespace, an exception to raise from
    ``run()``, or ``("create", exception)`` to raise from ``Trial.create``.
    Outcomes are looked up by trial name (the rollout id).
    """

    def __init__(self) -> None:
        self.configs: list[TrialConfig] = []
        self.outcomes: dict[str, object] = {}

    async def create(self, config: TrialConfig) -> SimpleNamespace:
        self.configs.append(config)
        outcome = self.outcomes.get(config.trial_name, result(rewards={"reward": 1.0}))
        if isinstance(outcome, tuple) and outcome[0] == "create":
            raise outcome[1]

        async def run() -> object:
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        return SimpleNamespace(run=run)


def result(
    *, rewards: Mapping[str, Any] | None = None, exception: tuple[str, str] | None = None
) -> SimpleNamespace:
    """A duck-typed Harbor trial result."""
    verifier_result = None if rewards is None else SimpleNamespace(rewards=dict(rewards))
    exception_info = (
        None
        if exception is None
        else SimpleNamespace(exception_type=exception[0], exception_message=exception[1])
    )
    return SimpleNamespace(verifier_result=verifier_result, exception_info=exception_info)


@pytest.fixture
def scripted_trials(monkeypatch: pytest.MonkeyPatch) -> ScriptedTrials:
    scripted = ScriptedTrials()
    monkeypatch.setattr(Trial, "create", scripted.create)
    return scripted


@pytest.fixture
def harbor_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="benchmax.envs.harbor.env")
    return caplog
