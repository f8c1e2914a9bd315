"""What an ``AgentEnv`` program is given and what it leaves: ``AgentTask``,
``AgentEndpoint``, ``AgentOutput``, ``AgentRun`` and the settled ``AgentRollout``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.env import BaseRollout
from benchmax.envs.shared_types import Example

if TYPE_CHECKING:
    from benchmax.capture import CapturedCall

__all__ = ["AgentEndpoint", "AgentOutput", "AgentRollout", "AgentRun", "AgentTask"]


@dataclass(frozen=True, slots=True)
class AgentTask:
    """The rollout a program runs for: ``rollout_id``, the ``example`` (its ``payload`` is
    the task, sent as JSON on a command's stdin) and ``workdir``, the rollout's own
    working directory (a command runs in it)."""

    rollout_id: str
    example: Example[JsonRow]
    workdir: Path

    @property
    def payload(self) -> JsonRow:
        return self.example.payload


@dataclass(frozen=True, slots=True)
class AgentEndpoint:
    """Where a program calls the model: the rollout's capture ``base_url``, its own
    ``api_key`` (valid for this rollout only; never the upstream's credential; masked in
    ``repr``), the ``model`` name to call, and ``ended``, set when the capture ended the
    rollout (a wrong model name, a spent budget, a failed upstream call): a program run
    in-process should stop then."""

    base_url: str
    api_key: str = field(repr=False)
    model: str
    ended: asyncio.Event = field(repr=False, compare=False)

    def environment(self) -> dict[str, str]:
        """``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL`` for a program."""
        return {
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": self.api_key,
            "OPENAI_MODEL": self.model,
        }


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """What ``run_agent`` returns: the program's ``exit_code`` (0: success; ``None``: it
    was stopped before exiting) and the ``stdout``/``stderr`` text kept."""

    exit_code: int | None = 0
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True, slots=True)
class AgentRun:
    """What ``compute_reward`` reads as ``rollout.agent``: the program's ``exit_code``,
    ``stdout`` and ``stderr`` (as far as kept), its ``workdir`` (still there while
    ``compute_reward`` runs) and the model ``calls`` it made, as captured."""

    exit_code: int | None
    stdout: str
    stderr: str
    workdir: Path
    calls: tuple[CapturedCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRollout(BaseRollout):
    """A finished ``AgentEnv`` rollout: ``messages`` is the last call's conversation with
    its reply (empty when no call was made), ``example_args`` the payload (a payload that
    is not an object is under ``"payload"``) and ``agent`` what the program did."""

    agent: AgentRun


def example_args_of(payload: object) -> Mapping[str, Any]:
    """The payload as ``example_args``."""
    return dict(payload) if isinstance(payload, Mapping) else {"payload": payload}
