"""The calculator example with ``strict: true`` tools: vLLM 0.32 then constrains a forced
call's arguments to each tool's schema (without it, ``tool_choice: required`` pins only the
``<tool_call>`` envelope and a 135M model writes arguments that parse as nothing)."""

from __future__ import annotations

from typing import Any

from examples.calculator.env import CalculatorEnv

from benchmax.envs import Tool


class StrictCalculatorEnv(CalculatorEnv):
    """``CalculatorEnv`` whose tools say ``"strict": true``."""

    async def list_tools(self) -> list[Tool]:
        tools: list[Any] = await super().list_tools()
        return [{**tool, "function": {**tool["function"], "strict": True}} for tool in tools]
