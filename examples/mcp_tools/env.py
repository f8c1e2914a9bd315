"""A tool task served by an MCP server: look a book's year up in a library catalog.

Rows look like ``{"title": "Paper Moons", "answer": 1976}``. The tools come from
``server.py`` in this folder, an MCP server started over stdio by ``MCPServer``; the model
may ``search`` titles and read a book's ``details``, then answers in ``<answer>`` tags.
Rewards: ``correct`` (the tagged year is the book's) and ``grounded`` (the year it gave
appears in a tool result of its transcript, i.e. it was looked up, not guessed).

The catalog is read-only, so every rollout shares one server process
(``shared=True``); a server whose tools change state would keep the default, one server
per rollout.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    canonical_example_id,
)
from benchmax.rewards import extract_completion_text
from benchmax.tools import MCPServer

_ANSWER = re.compile(r"<answer>\s*(\d{3,4})\s*</answer>")
_SERVER = Path(__file__).with_name("server.py")


class LibraryEnv(BaseEnv):
    """Find a book's first-publication year with the library's MCP tools."""

    reward_keys = ("correct", "grounded")
    max_turns = 5
    max_tool_calls = 6
    tool_timeout = 30.0
    tools = (MCPServer(command=[sys.executable, str(_SERVER)], shared=True, name="library"),)

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        question = (
            f'In which year was the book "{row["title"]}" first published? '
            "Look it up with the library tools, then answer as <answer>YEAR</answer>."
        )
        payload = {
            "prompt_messages": [{"role": "user", "content": question}],
            "answer": int(row["answer"]),
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        match = _ANSWER.search(extract_completion_text(rollout.messages))
        if match is None:
            return {"correct": 0.0, "grounded": 0.0}
        year = match.group(1)
        looked_up = any(
            message["role"] == "tool" and f'"year": {year}' in str(message["content"])
            for message in rollout.messages
        )
        correct = int(year) == rollout.example_args["answer"]
        return {"correct": float(correct), "grounded": float(looked_up)}
