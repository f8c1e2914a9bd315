"""A mock question writer for ``benchmax generate-qa``: deterministic, offline, plausible.

It reads the passages from the request (between ``<passage>`` tags) and turns simple
sentences into question/answer pairs (``X is the Y.`` -> ``What is the Y?`` / ``X``;
``X was done in 1215.`` -> ``In what year ...?``; ``X has two moons.`` -> ``How many ...``).
It answers every kind of request ``generate-qa`` sends, and like a real model it makes the
mistakes each stage is there to catch:

- writing: sometimes prose instead of JSON the first time (the retry path); lookup questions
  that repeat their sentence (the trivial-retrieval filter) and now and then another fact's
  answer (the grounding check); asked again with the reasons, it paraphrases the question
  or gives the right answer. Multi-hop questions join a fact of each passage; reasoning
  questions pick which of two subjects a fact is about.
- grounding: a pair is supported when it is one this writer derives from the passages with
  that answer (or, for a question it does not know, when the answer's words are there).
- styles: ``keyword`` keeps the content words; ``expert`` adds a specialist's framing.

It works on any text, so ``generate-qa`` can be tried offline on your own documents: a
sentence none of the patterns above reads still gives a question about its salient word (a
number, a name, else its longest word), asked through the sentence's other content words
(``Which name does the passage connect with "capital Japan"?`` -> ``Tokyo``)::

    uv run benchmax generate-qa examples/corpus -o qa \
        --mock-policy examples/corpus/policy.py:reply
    uv run benchmax generate-qa path/to/your/docs -o my-qa \
        --mock-policy examples/corpus/policy.py:reply
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from benchmax.testing import message_text

_PASSAGE = re.compile(r"<passage>\n(.*?)\n</passage>", re.DOTALL)
_PAIRS = re.compile(r"Write up to (\d+) ")
_RETRY = "Your previous reply could not be used"
_FEEDBACK = "Some pairs you wrote for this request were rejected:"
_REJECTED = re.compile(r'^- ("(?:[^"\\]|\\.)*") -> ("(?:[^"\\]|\\.)*"): (.*)$', re.MULTILINE)
_GROUNDING = "Task: check that answers are supported"
_CHECKED = re.compile(r'^\d+\. question: ("(?:[^"\\]|\\.)*") answer: ("(?:[^"\\]|\\.)*")$', re.M)
_STYLING = "Task: rewrite questions in a given style"
_STYLED = re.compile(r"^\d+\. \[(\w+)\] (.*)$", re.MULTILINE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

_IDENTITY = re.compile(
    r"^(?P<subject>[A-Z][\w'-]*(?: [\w'-]+){0,3}?) (?P<verb>is|was|are|were) "
    r"(?P<rest>(?:the|a|an) .+?)\.$"
)
_YEAR = re.compile(
    r"^(?P<subject>.+?) (?P<aux>was|were) (?P<rest>[a-z]+(?:ed|en|t)\b.*?),? in "
    r"(?P<year>\d{2,4}(?: BC| AD)?)\.$"
)
_COUNT = re.compile(
    r"^(?P<subject>[A-Z][\w ]*?) has (?P<number>two|three|four|\d+) (?P<noun>\w+)\.$"
)
_SYMBOL = re.compile(r"^(?P<element>[A-Z]\w+) has the chemical symbol (?P<symbol>[A-Z][a-z]?)\.$")
_PEOPLE = re.compile(r"\b(person|chemist|astronomer|craftsman|king|queen|explorer|writer)\b")

_SYNONYMS = {
    "smallest": "tiniest",
    "largest": "biggest",
    "hottest": "warmest",
    "tallest": "highest",
    "closest": "nearest",
    "farthest": "most distant",
    "planet": "world",
    "solar system": "Sun's family of worlds",
    "first": "earliest",
    "most common": "most abundant",
    "chemical name": "scientific name",
    "meadow": "field",
    "charter": "document",
    "ocean": "sea",
    "deepest": "lowest",
    "element": "substance",
    "form": "variety",
}
_STOP = {
    "a", "an", "the", "of", "in", "on", "is", "was", "are", "were", "what", "which", "who",
    "how", "does", "do", "did", "to", "and", "that", "by", "for", "with", "year", "many",
}  # fmt: skip


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text.startswith("The ") else text


def _digest(text: str) -> int:
    return hashlib.sha256(text.encode()).digest()[0]


def _sentences(passage: str) -> Iterator[str]:
    """Sentences of the passage's paragraphs (headings and title lines left out)."""
    for paragraph in re.split(r"\n\s*\n", passage):
        lines = [line for line in paragraph.splitlines() if not line.startswith("#")]
        text = " ".join(" ".join(lines).split())
        if text.endswith((".", "!", "?")):
            yield from _SENTENCE.split(text)


def pairs_in(passage: str) -> Iterator[dict[str, str]]:
    """The lookup questions this writer derives from ``passage``: those of the sentence
    patterns in sentence order, then one about each other sentence (``generic_pair``)."""
    others = []
    for sentence in _sentences(passage):
        found = _pattern_pair(sentence)
        if found is None:
            others.append(sentence)
        else:
            yield found
    for sentence in others:
        if (pair := generic_pair(sentence)) is not None:
            yield pair


def generic_pair(sentence: str) -> dict[str, str] | None:
    """A question about any sentence of five words or more: its answer the sentence's
    first number, else its last name (a capitalized word after the first), else its
    longest word; asked through up to four of its other content words, so it does not
    repeat the sentence."""
    words = re.findall(r"[\w'-]+", sentence)
    if len(words) < 5:
        return None
    numbers = [w for w in words if re.fullmatch(r"\d[\d,.]*", w)]
    names = [w for w in words[1:] if w[:1].isupper() and w.lower() not in _STOP]
    if numbers:
        answer, kind = numbers[0], "What number does the passage give"
    elif names:
        answer, kind = names[-1], "Which name does the passage connect"
    else:
        answer = max(words, key=len)
        kind = "Which term does the passage use"
    content = [w.lower() for w in words if w != answer and w.lower() not in _STOP]
    if len(content) < 2:
        return None
    keywords = " ".join(sorted(dict.fromkeys(content), key=len, reverse=True)[:4])
    return {"question": f'{kind} with "{keywords}"?', "answer": answer}


def _pattern_pair(sentence: str) -> dict[str, str] | None:
    """The pair of the first sentence pattern ``sentence`` matches, else ``None``."""
    if match := _SYMBOL.match(sentence):
        element, symbol = match["element"], match["symbol"]
        return {"question": f"Which element has the chemical symbol {symbol}?", "answer": element}
    if match := _COUNT.match(sentence):
        subject, noun = match["subject"], match["noun"]
        return {"question": f"How many {noun} does {subject} have?", "answer": match["number"]}
    if match := _YEAR.match(sentence):
        subject = _lower_first(match["subject"])
        question = f"In what year {match['aux']} {subject} {match['rest']}?"
        return {"question": question, "answer": match["year"]}
    if match := _IDENTITY.match(sentence):
        subject = match["subject"]
        asked = "Who" if _PEOPLE.search(match["rest"]) else "What"
        return {"question": f"{asked} {match['verb']} {match['rest']}?", "answer": subject}
    return None


def paraphrase(question: str) -> str:
    """``question`` in other words (synonyms, a reordered opening), meaning kept."""
    for word, other in _SYNONYMS.items():
        question = re.sub(rf"\b{word}\b", other, question)
    for opening, other in (("What is ", "Name what is "), ("Who was ", "Name the one who was ")):
        if question.startswith(opening):
            return f"{other}{question[len(opening) :].rstrip('?')}."
    return question


def multi_hop_pairs(first: str, second: str) -> Iterator[dict[str, str]]:
    """A fact of each passage joined into one question."""
    for one, other in zip(pairs_in(first), pairs_in(second), strict=False):
        if one["answer"] == other["answer"]:
            continue
        question = f"{one['question'][:-1]}, and {other['question'][0].lower()}"
        yield {
            "question": question + other["question"][1:],
            "answer": f"{one['answer']} and {other['answer']}",
        }


def reasoning_pairs(passage: str) -> Iterator[dict[str, str]]:
    """Which of two subjects a fact is about: ``Of Venus and Mercury, which is the ...?``."""
    facts = [
        match
        for sentence in _sentences(passage)
        if (match := _IDENTITY.match(sentence)) and not _PEOPLE.search(match["rest"])
    ]
    for index, fact in enumerate(facts):
        other = facts[(index + 1) % len(facts)]
        if other["subject"] == fact["subject"]:
            continue
        names = sorted([fact["subject"], other["subject"]], key=_digest)
        question = f"Of {names[0]} and {names[1]}, which {fact['verb']} {fact['rest']}?"
        yield {"question": paraphrase(question), "answer": fact["subject"]}


def known_answers(passages: list[str]) -> dict[str, str]:
    """Every question this writer asks about ``passages`` (any round), with its answer."""
    known: dict[str, str] = {}
    for passage in passages:
        for sentence in _sentences(passage):
            if (generic := generic_pair(sentence)) is not None:
                known[generic["question"]] = generic["answer"]
    for passage in passages:
        for pair in [*pairs_in(passage), *reasoning_pairs(passage)]:
            known[pair["question"]] = known[paraphrase(pair["question"])] = pair["answer"]
    for first in passages:
        for second in passages:
            for pair in multi_hop_pairs(first, second):
                known[pair["question"]] = known[paraphrase(pair["question"])] = pair["answer"]
    return known


def _write(prompt: str, passages: list[str]) -> list[dict[str, str]]:
    if "(question type: multi-hop)" in prompt and len(passages) == 2:
        pairs = list(multi_hop_pairs(*passages))
    elif "(question type: reasoning)" in prompt:
        pairs = list(reasoning_pairs(passages[0]))
    else:
        pairs = list(pairs_in(passages[0]))
    answers = [pair["answer"] for pair in pairs]
    for pair in pairs:  # now and then another fact's answer: the grounding check catches it
        wrong = [answer for answer in answers if answer != pair["answer"]]
        if wrong and _digest(pair["question"]) % 4 == 1:
            pair["answer"] = wrong[0]
    return pairs


def _rewrite(prompt: str, passages: list[str]) -> list[dict[str, str]]:
    """New pairs for the rejected ones: paraphrased, with the right answer; a question
    rejected for repeating its sentence that a paraphrase would still repeat (a short
    sentence) is asked the generic way instead."""
    known = known_answers(passages)
    sentences = {
        pair["question"]: sentence
        for passage in passages
        for sentence in _sentences(passage)
        if (pair := _pattern_pair(sentence)) is not None
    }
    pairs = []
    for raw_question, _answer, reason in _REJECTED.findall(prompt):
        question = json.loads(raw_question)
        if question not in known:
            continue
        sentence = sentences.get(question)
        if "repeats a sentence" in reason and sentence is not None and len(sentence.split()) < 9:
            generic = generic_pair(sentence)
            if generic is not None:
                pairs.append(generic)
                continue
        pairs.append({"question": paraphrase(question), "answer": known[question]})
    return pairs


def _ground(prompt: str, passages: list[str]) -> dict[str, Any]:
    known = known_answers(passages)
    words = set(re.findall(r"\w+", " ".join(passages).lower()))
    verdicts = []
    for number, (raw_question, raw_answer) in enumerate(_CHECKED.findall(prompt), start=1):
        question, answer = json.loads(raw_question), json.loads(raw_answer)
        if question in known:
            supported = known[question] == answer
        else:
            supported = set(re.findall(r"\w+", answer.lower())) <= words
        reason = "stated in the passage" if supported else "the passage names someone else"
        verdicts.append({"pair": number, "supported": supported, "reason": reason})
    return {"verdicts": verdicts}


def _style(style: str, question: str) -> str:
    if style == "keyword":
        kept = [w for w in re.findall(r"[\w'-]+", question) if w.lower() not in _STOP]
        return " ".join(kept).lower()
    return f"From a specialist's standpoint: {question}"


def reply(body: dict[str, Any]) -> str:
    prompt = message_text(body["messages"][-1]["content"])
    passages = _PASSAGE.findall(prompt)
    if prompt.startswith(_GROUNDING):
        return json.dumps(_ground(prompt, passages))
    if prompt.startswith(_STYLING):
        return json.dumps({"questions": [_style(s, q) for s, q in _STYLED.findall(prompt)]})
    wanted = _PAIRS.search(prompt)
    limit = int(wanted.group(1)) if wanted else 3
    first = passages[0] if passages else ""
    if _RETRY not in prompt and _FEEDBACK not in prompt and _digest(first) % 5 == 0:
        return "Sure! Here are a few questions about the passage you gave me."
    pairs = _rewrite(prompt, passages) if _FEEDBACK in prompt else _write(prompt, passages)
    return json.dumps({"pairs": pairs[:limit]})
