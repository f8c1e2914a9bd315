"""Does the model see the environment's tools? A chat template that drops ``tools``.

Many small models' chat templates ignore the ``tools`` argument (SmolLM2's does): an
environment offering tools then trains a model that never saw them, every rollout
answering without a call, every group at zero variance, and nothing said.
:func:`dropped_tools` renders a short conversation with the environment's tools, as the
sampler renders every request, and names the tools whose names do not appear in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["PROBE_MESSAGES", "dropped_tools", "offered_tools"]

PROBE_MESSAGES: tuple[Mapping[str, str], ...] = (
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello."},
)
"""The conversation rendered with the tools (a system turn: some templates list the tools
in it)."""


def offered_tools(env: Any) -> list[Mapping[str, object]]:
    """The tools ``env`` advertises (its ``list_tools()``; ``[]`` for an environment
    without one), listed on a private event loop (in a worker thread when this thread
    already runs one); what ``list_tools`` raises propagates."""
    lister = getattr(env, "list_tools", None)
    if not callable(lister):
        return []

    async def listed() -> list[Mapping[str, object]]:
        tools = await lister()
        return [tool for tool in tools or [] if isinstance(tool, Mapping)]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(listed())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, listed()).result()


def dropped_tools(tokenizer: Any, tools: Sequence[Mapping[str, object]]) -> list[str]:
    """The names of ``tools`` that ``tokenizer``'s chat template leaves out of
    :data:`PROBE_MESSAGES` rendered with them (all of them when it raises on ``tools``);
    ``[]`` when every name appears, or there are no tools."""
    names = [name for name in map(_tool_name, tools) if name]
    if not names:
        return []
    try:
        text = str(
            tokenizer.apply_chat_template(
                [dict(message) for message in PROBE_MESSAGES],
                tools=list(tools),
                add_generation_prompt=True,
                tokenize=False,
            )
        )
    except Exception:  # jinja raises many kinds: the template cannot render these tools
        return names
    return [name for name in names if name not in text]


def _tool_name(tool: Mapping[str, object]) -> str | None:
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return name if isinstance(name, str) and name else None
