"""A served environment in its own process, for tests that measure the server's memory.

``python hostile_server.py '{"session_timeout": 30}'`` serves ``WaitEnv`` over OpenEnv on
127.0.0.1 (a free port) with those ``ServeOptions`` and prints its base URL, then runs
until killed. ``WaitEnv``'s ``wait`` tool never returns (a step that stays busy) and its
``big`` tool returns ``size`` bytes of text.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from benchmax.envs import BaseEnv, Dataset, Example
from benchmax.serving import ServeOptions, serving


class WaitEnv(BaseEnv):
    reward_keys = ("ok",)
    max_turns = 1000

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None):
        payload = {"prompt_messages": [{"role": "user", "content": "go"}]}
        return Dataset([Example(id="only", payload=payload)])

    async def list_tools(self) -> list[Any]:
        size = {"type": "object", "properties": {"size": {"type": "integer"}}}
        return [
            {"type": "function", "function": {"name": "wait", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "big", "parameters": size}},
        ]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if tool_name == "big":
            return "x" * int(tool_args.get("size", 1_000_000))
        await asyncio.Event().wait()
        return "never"

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        return {"ok": 1.0}


async def main(settings: dict[str, Any]) -> None:
    async with serving(WaitEnv(), ServeOptions(port=0, **settings)) as server:
        print(server.base_url, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1] if len(sys.argv) > 1 else "{}")))
