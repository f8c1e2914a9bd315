"""A scripted mock model for the library task, using the MCP tools well and badly.

Each rollout follows one strategy, chosen from the question and the rollout's index in its
group (the runner names each mock session after its rollout, ending in ``r<k>``):

* ``careful``: ``search`` the full title, ``details`` of the exact match, answer its year;
* ``hasty``: ``search`` the title's first word, take the first hit (sometimes another
  book), answer that book's year: looked up, but not always right;
* ``clumsy``: passes the title as a ``book_id``; the server answers with an error
  (``isError``, shown to the model as the tool result) and the model guesses;
* ``sloppy``: calls ``search`` with a misnamed argument (``q``), reads the validation
  message, then does it right;
* ``guesser``: answers at once without tools.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_TITLE = re.compile(r'book "([^"]+)"')
_STRATEGIES = ("careful", "hasty", "careful", "clumsy", "sloppy", "guesser", "careful")


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def _results(messages: list[dict[str, Any]]) -> list[Any]:
    """The tool results so far: decoded JSON objects, or the text of an error."""
    results: list[Any] = []
    for message in messages:
        if message["role"] == "tool":
            text = message_text(message["content"])
            try:
                results.append(json.loads(text))
            except ValueError:
                results.append(text)
    return results


def library(body: dict[str, Any], request: RecordedRequest) -> dict[str, Any] | str:
    messages = body["messages"]
    question = next(message_text(m["content"]) for m in messages if m["role"] == "user")
    match = _TITLE.search(question)
    if match is None:
        return "<answer>0</answer>"
    title = match.group(1)
    seed = hashlib.sha256(question.encode()).digest()[0]
    # A quarter of the questions are easy: every rollout is careful (no reward variance).
    position = 0 if seed % 4 == 0 else seed + rollout_index(request)
    strategy = _STRATEGIES[position % len(_STRATEGIES)]
    results = _results(messages)
    last = results[-1] if results else None
    if isinstance(last, dict) and "year" in last:
        return f"It was first published in <answer>{last['year']}</answer>."
    if strategy == "guesser":
        return "I believe it is <answer>1990</answer>."
    if strategy == "clumsy":
        if not results:
            return _call("details", book_id=title)
        return "The catalog would not tell me; my guess is <answer>2000</answer>."
    if strategy == "sloppy" and not results:
        return _call("search", q=title)
    if isinstance(last, dict) and "matches" in last:
        matches = last["matches"]
        if strategy == "hasty":
            chosen = matches[0] if matches else None
        else:
            chosen = next((m for m in matches if m["title"] == title), None)
        if chosen is None:
            return "I could not find it; <answer>1999</answer>."
        return _call("details", book_id=chosen["id"])
    query = title.split()[0] if strategy == "hasty" else title
    return _call("search", query=query)
