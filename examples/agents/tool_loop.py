"""An OpenAI-SDK tool-calling loop: reads a task on stdin, prints its answer.

Nothing here knows about benchmax: the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY, the
model name comes from OPENAI_MODEL.
"""

import json
import os
import sys

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


def main() -> None:
    task = json.load(sys.stdin)
    client = OpenAI()
    question = f"What is {task['a']} + {task['b']}? Use the add tool, then answer with the number."
    messages: list = [{"role": "user", "content": question}]
    for _ in range(4):
        reply = client.chat.completions.create(
            model=os.environ["OPENAI_MODEL"], messages=messages, tools=TOOLS
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(message.content)
            return
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            result = int(arguments["a"]) + int(arguments["b"])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    sys.exit("no answer after 4 turns")


if __name__ == "__main__":
    main()
