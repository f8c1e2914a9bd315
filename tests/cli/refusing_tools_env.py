"""An environment whose toolset cannot open: a library logs a multi-line error first, then
the toolset's ``rollout_context`` raises (the rollout ends as ``tool_error``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tests.runner.sample_envs import AnswerEnv

from benchmax.tools import Toolset, tool


class Sandbox(Toolset):
    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
        try:
            raise ValueError("1 validation error\n  bad frame\n    For further information visit x")
        except ValueError:
            logging.getLogger("somelib.client").exception("Failed to parse a message")
        raise ConnectionRefusedError("sandbox service refused the session")
        yield

    @tool
    def look(self, path: str) -> str:
        """Read a file."""
        return path


class RefusingToolsEnv(AnswerEnv):
    tools = [Sandbox()]
