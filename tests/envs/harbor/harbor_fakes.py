"""Stand-ins for Harbor's sandbox and agent steps, importable by Harbor import paths.

``LocalFakeSandbox`` is a real ``harbor.environments.base.BaseEnvironment`` that
never starts a container: it is "mounted" (the trial directory is the sandbox's
log directory) and answers the verifier's test command by copying the task's
``tests/reward.json`` (and ``tests/reward-details.json``) into the verifier
directory, exactly where a real ``test.sh`` would write them. ``RecordingAgent``
is a real ``BaseAgent`` that records what Harbor handed it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.agent.context import AgentContext

SANDBOX_IMPORT_PATH = f"{__name__}:LocalFakeSandbox"
AGENT_IMPORT_PATH = f"{__name__}:RecordingAgent"


@dataclass
class Recorder:
    """What the fakes observed, reset by the ``harbor_recorder`` fixture."""

    agents: list[dict[str, Any]] = field(default_factory=list)
    sandbox_environ: list[dict[str, str | None]] = field(default_factory=list)
    watched_variables: tuple[str, ...] = ()
    active: int = 0
    peak: int = 0

    def reset(self) -> None:
        self.agents.clear()
        self.sandbox_environ.clear()
        self.watched_variables = ()
        self.active = 0
        self.peak = 0


RECORDER = Recorder()


class LocalFakeSandbox(BaseEnvironment):
    """A sandbox that runs nothing; the task's declared rewards stand in for test.sh."""

    @staticmethod
    def type() -> str:
        return "local-fake"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(mounted=True)

    def _validate_definition(self) -> None:
        return None

    async def start(self, force_build: bool) -> None:
        RECORDER.sandbox_environ.append(
            {name: os.environ.get(name) for name in RECORDER.watched_variables}
        )

    async def stop(self, delete: bool) -> None:
        return None

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        return None

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        return None

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        return None

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        return None

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        if "test.sh" in command and not command.startswith("chmod"):
            tests_dir = Path(self.environment_dir).parent / "tests"
            verifier_dir = self.trial_paths.verifier_dir
            verifier_dir.mkdir(parents=True, exist_ok=True)
            for name in ("reward.json", "reward-details.json"):
                if (tests_dir / name).is_file():
                    shutil.copyfile(tests_dir / name, verifier_dir / name)
        return ExecResult(stdout="", stderr="", return_code=0)


class RecordingAgent(BaseAgent):
    """Records its model, env and session, optionally sleeping or failing in ``run``."""

    def __init__(
        self,
        *args: Any,
        delay: float = 0.0,
        fail_with: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._delay = delay
        self._fail_with = fail_with

    @staticmethod
    def name() -> str:
        return "recording-agent"

    def version(self) -> str | None:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        RECORDER.agents.append(
            {
                "model_name": self.model_name,
                "env": self.extra_env,
                "session_id": self.session_id,
                "instruction": instruction,
            }
        )
        RECORDER.active += 1
        RECORDER.peak = max(RECORDER.peak, RECORDER.active)
        try:
            await asyncio.sleep(self._delay)
        finally:
            RECORDER.active -= 1
        if self._fail_with is not None:
            raise RuntimeError(self._fail_with)
