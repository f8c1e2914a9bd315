"""A program that rewrites its history between calls, as many harnesses do.

First it asks for a plan; then it asks for the answer with the plan's reasoning dropped
and the plan message edited (shortened), so the second prompt does not extend the first
call's prompt + completion: the capture records a second branch.
"""

import json
import os
import sys

from openai import OpenAI


def main() -> None:
    task = json.load(sys.stdin)
    client = OpenAI()
    model = os.environ["OPENAI_MODEL"]
    question = f"What is {task['a']} + {task['b']}?"
    messages: list = [{"role": "user", "content": f"Plan how to answer: {question}"}]
    plan = client.chat.completions.create(model=model, messages=messages).choices[0].message
    edited = {"role": "assistant", "content": (plan.content or "")[:40] + " [edited]"}
    messages = [messages[0], edited, {"role": "user", "content": question}]
    answer = client.chat.completions.create(model=model, messages=messages).choices[0].message
    print(answer.content)


if __name__ == "__main__":
    main()
