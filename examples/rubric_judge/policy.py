"""One mock policy that plays both roles of the rubric-judge task, deterministically.

* As the **policy model** (requests whose session is a rollout, ending in ``r<k>``) it
  answers each question in one of four styles chosen from the question and ``k``:
  concise and right, right but padded, right with an invented claim, or wrong.
* As the **judge** (requests carrying a rubric-grading prompt, sent to ``@mock``) it
  grades the response section of the prompt with simple checks and replies with the
  JSON object the judge expects.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_TITLE = re.compile(r"Criterion title:\s*(.+)")
_INVENTED = "as the Royal Society of Lisbon confirmed in 1492"


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def _answer_key(question: str) -> str:
    return hashlib.sha256(question.encode()).hexdigest()


def respond(body: dict[str, Any], request: RecordedRequest) -> str:
    prompt = message_text(body["messages"][-1]["content"])
    if "Criterion title:" in prompt:
        return grade(prompt)
    return answer(prompt, rollout_index(request))


def answer(question: str, k: int) -> str:
    truth = _lookup(question)
    seed = int(_answer_key(question)[:2], 16)
    style = seed % 4 if seed % 2 == 0 else (seed + k) % 4
    if style == 0:
        return f"{truth}."
    if style == 1:
        return (
            f"What a great question! Many people wonder about this. The answer is {truth}. "
            "I hope this helps, and feel free to ask me anything else."
        )
    if style == 2:
        return f"{truth}, {_INVENTED}."
    return "I believe it is Atlantis."


def _lookup(question: str) -> str:
    for key, value in _ANSWERS.items():
        if key in question.lower():
            return value
    return "Atlantis"


def _sections(prompt: str) -> dict[str, str]:
    """Blank-line separated blocks of the grading prompt, keyed by their first line."""
    sections = {}
    for block in prompt.split("\n\n"):
        head, _, rest = block.partition("\n")
        sections[head.strip().lower()] = rest.strip()
    return sections


def grade(prompt: str) -> str:
    title_match = _TITLE.search(prompt)
    title = title_match.group(1).strip().lower() if title_match else ""
    sections = _sections(prompt)
    response = next((v for k, v in sections.items() if k.startswith("response")), "")
    reference = next((v for k, v in sections.items() if k.startswith("reference")), "")
    if title == "correctness":
        score = int(bool(reference) and reference.lower() in response.lower())
    elif title == "concision":
        score = int(len(response) <= 60 and response.count(".") <= 1)
    else:  # fabrication: 1 means the flaw is present
        score = int("1492" in response or "Atlantis" in response)
    return json.dumps({"score": score, "reasoning": f"mock judge checked {title or 'criterion'}"})


_ANSWERS = {
    "pride and prejudice": "Jane Austen",
    "theory of general relativity": "Albert Einstein",
    "first person to walk on the moon": "Neil Armstrong",
    "penicillin": "Alexander Fleming",
    "the origin of species": "Charles Darwin",
    "telephone": "Alexander Graham Bell",
    "tallest mountain": "Mount Everest",
    "longest river": "The Nile",
    "largest ocean": "The Pacific Ocean",
    "smallest prime": "2",
    "speed of light": "299,792 kilometres per second",
    "hardest natural substance": "Diamond",
    "largest desert": "Antarctica",
    "capital of germany": "Berlin",
    "capital of egypt": "Cairo",
    "capital of brazil": "Brasilia",
    "mona lisa": "Leonardo da Vinci",
    "romeo and juliet": "William Shakespeare",
    "closest star": "The Sun",
    "periodic table": "Dmitri Mendeleev",
    "planets in the solar system": "8",
    "chemical formula of water": "H2O",
    "world war ii end": "1945",
    "freezing point of water in fahrenheit": "32",
}
