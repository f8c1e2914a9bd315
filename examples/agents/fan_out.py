"""A program that fans out parallel calls (three subagents at once), then combines them."""

import asyncio
import json
import os
import sys

from openai import AsyncOpenAI


async def main() -> None:
    task = json.load(sys.stdin)
    client = AsyncOpenAI()
    model = os.environ["OPENAI_MODEL"]
    a, b = task["a"], task["b"]
    questions = [f"What is {a} + 0?", f"What is {b} + 0?", f"What is {a} + {b}?"]
    replies = await asyncio.gather(
        *(
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": question}]
            )
            for question in questions
        )
    )
    notes = "; ".join(r.choices[0].message.content or "" for r in replies)
    final = await client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": f"Notes: {notes}. What is {a} + {b}?"}],
    )
    print(final.choices[0].message.content)


if __name__ == "__main__":
    asyncio.run(main())
