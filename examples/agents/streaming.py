"""A program that streams its reply (stream=True) and prints the text as it arrives."""

import json
import os
import sys

from openai import OpenAI


def main() -> None:
    task = json.load(sys.stdin)
    client = OpenAI()
    stream = client.chat.completions.create(
        model=os.environ["OPENAI_MODEL"],
        messages=[{"role": "user", "content": f"What is {task['a']} + {task['b']}?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            print(chunk.choices[0].delta.content, end="", flush=True)
    print()


if __name__ == "__main__":
    main()
