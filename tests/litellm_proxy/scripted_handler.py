"""A LiteLLM custom provider that answers from a script, with reasoning and content parts.

LiteLLM's proxy loads this file (copied beside its config) as ``scripted_handler.handler``.
Every reply is a pure function of the request (the scenario is the model name, the turn is
the number of assistant messages so far), so concurrent rollouts see the same script.
Nothing here talks to an upstream model.

Scenarios:
- ``think``: ``<think>`` holding a draft answer, then the final ``<answer>``.
- ``template``: a draft answer, a lone ``</think>`` (the chat template opened the block),
  then the final answer.
- ``parts``: the answer as a list of text parts, the reasoning in ``reasoning_content``.
- ``cutoff``: cut off inside ``<think>`` (``finish_reason: length``).
- ``calc``: the calculator task over three turns: ``add`` and ``multiply`` tool calls with
  ``reasoning_content``, then the answer as text parts with a ``<think>`` part and a
  ``reasoning`` field. A request whose earlier assistant turns carry reasoning fields is
  answered with a 400: reasoning is sent back only when an environment opts in.
- ``calc-strict``: the same, but like DeepSeek's thinking mode with tools it answers 400
  unless every earlier assistant turn carries its ``reasoning_content`` back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from litellm import CustomLLM, ModelResponse
from litellm.llms.custom_llm import CustomLLMError

_ARITHMETIC = re.compile(r"(-?\d+)\s*([-+*])\s*(-?\d+)")
_CALCULATOR = re.compile(r"\((-?\d+) \+ (-?\d+)\) \* (-?\d+)")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def _last(messages: list[dict[str, Any]], role: str) -> str:
    return next(_text(m.get("content")) for m in reversed(messages) if m.get("role") == role)


def _solve(question: str) -> int:
    left, operator, right = _ARITHMETIC.search(question).groups()
    a, b = int(left), int(right)
    return a * b if operator == "*" else a + b if operator == "+" else a - b


def _call(name: str, a: int, b: int) -> dict[str, Any]:
    arguments = json.dumps({"a": a, "b": b})
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _calculator(messages: list[dict[str, Any]], turn: int) -> dict[str, Any]:
    a, b, c = (int(v) for v in _CALCULATOR.search(_last(messages, "user")).groups())
    if turn == 0:
        return {
            "content": None,
            "reasoning_content": "Add first.",
            "tool_calls": [_call("add", a, b)],
        }
    if turn == 1:
        total = json.loads(_last(messages, "tool"))["result"]
        return {
            "content": [{"type": "text", "text": "Now multiply."}],
            "reasoning_content": f"The sum is {total}.",
            "tool_calls": [_call("multiply", total, c)],
        }
    results = [json.loads(_text(m["content"]))["result"] for m in messages if m["role"] == "tool"]
    total, product = results[0], results[-1]
    return {
        "content": [
            {"type": "text", "text": f"<think>{total} * {c} = {product}</think>"},
            {"type": "text", "text": f"The result is <answer>{product}</answer>."},
        ],
        "reasoning": f"The product is {product}.",
    }


def _reply(scenario: str, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if scenario in ("calc", "calc-strict"):
        earlier = [m for m in messages if m.get("role") == "assistant"]
        echoed = [m for m in earlier if m.get("reasoning_content") or m.get("reasoning")]
        if scenario == "calc" and echoed:
            raise CustomLLMError(status_code=400, message="reasoning was sent back")
        if scenario == "calc-strict" and len(echoed) < len(earlier):
            raise CustomLLMError(status_code=400, message="reasoning_content must be passed back")
        message = _calculator(messages, turn)
        return message, "tool_calls" if message.get("tool_calls") else "stop"
    answer = _solve(_last(messages, "user"))
    if scenario == "think":
        content = (
            f"<think>Draft: <answer>{answer + 1}</answer>? No.</think>\n<answer>{answer}</answer>"
        )
        return {"content": content}, "stop"
    if scenario == "template":
        content = (
            f"first try <answer>{answer - 1}</answer>, no...</think> <answer>{answer}</answer>"
        )
        return {"content": content}, "stop"
    if scenario == "parts":
        parts = [
            {"type": "text", "text": "<answer>"},
            {"type": "text", "text": f"{answer}</answer>"},
        ]
        return {"content": parts, "reasoning_content": f"It is {answer}."}, "stop"
    if scenario == "cutoff":
        return {"content": f"<think>Maybe <answer>{answer}</answer>, but"}, "length"
    raise ValueError(f"unknown scenario {scenario!r}")


class ScriptedModel(CustomLLM):
    """Replies from the script above; usage is reported like a real server's."""

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        message, finish_reason = _reply(model.rsplit("/", 1)[-1], messages)
        content = message.pop("content")
        response = ModelResponse(
            model=model,
            choices=[
                {
                    "index": 0,
                    "finish_reason": finish_reason,
                    "message": {"role": "assistant", "content": None, **message},
                }
            ],
            usage={
                "prompt_tokens": 11,
                "completion_tokens": 7,
                "total_tokens": 18,
                "completion_tokens_details": {"reasoning_tokens": 3},
            },
        )
        # LiteLLM's Message model only takes string content; set parts after validation.
        response.choices[0].message.content = content
        return response


handler = ScriptedModel()
