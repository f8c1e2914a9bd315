"""``BaseEnv``, the default OpenAI-compatible chat/tool loop, and its JSONL dataset."""

from benchmax.envs.base.dataset import JsonlDataset, JsonRow, resolve_dataset_path
from benchmax.envs.base.env import BaseEnv, BaseRollout
from benchmax.envs.base.openai_types import Message, Messages, Tool

__all__ = [
    "BaseEnv",
    "BaseRollout",
    "JsonRow",
    "JsonlDataset",
    "Message",
    "Messages",
    "Tool",
    "resolve_dataset_path",
]
