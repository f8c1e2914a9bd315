"""``generate_qa`` against the mock model server: replies, retries, filters, dedupe, split."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.datagen import (
    CACHE_NAME,
    GeneratedRow,
    GenerationConfig,
    QAPair,
    ReplyShapeError,
    build_qa_prompt,
    generate_qa,
    parse_qa_reply,
    split_by_document,
)
from benchmax.rewards import Judge
from benchmax.testing import Fault, MockModelServer, message_text

_PASSAGE = re.compile(r"<passage>\n(.*)\n</passage>", re.DOTALL)


def passage_of(body: dict[str, Any]) -> str:
    match = _PASSAGE.search(message_text(body["messages"][-1]["content"]))
    assert match is not None
    return match.group(1)


def lines_as_pairs(body: dict[str, Any]) -> str:
    """Each passage line ``question => answer`` becomes a pair (``~x``: an answer not in it)."""
    pairs = []
    for line in passage_of(body).splitlines():
        if "=>" in line:
            question, answer = (part.strip() for part in line.split("=>"))
            if answer.startswith("~"):
                answer = "completely unrelated words"
            pairs.append({"question": question, "answer": answer})
    return json.dumps({"pairs": pairs})


def write(directory: Path, documents: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in documents.items():
        (directory / name).write_text(text)
    return directory


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


ONE_STAGE = {"grounding_check": False, "trivial_overlap": None, "regenerate": False}
"""The writing stage alone: the checks by the model and regeneration have tests of their own."""


async def generate(server: MockModelServer, corpus: Path, output: Path, **options: Any) -> Any:
    options = {**ONE_STAGE, **options}
    judge = Judge(
        model="writer", base_url=server.base_url, auth=StaticBearerAuth("k"), max_retries=0
    )
    progress: list[tuple[int, int]] = []
    summary = await generate_qa(
        corpus,
        output,
        judge,
        GenerationConfig(**options),
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert progress[-1] == (summary.tasks, summary.tasks)
    return summary


CORPUS = {
    "france.txt": "What is the capital of France? => Paris\nWhere is the Louvre? => Paris",
    "japan.txt": "What is the capital of Japan? => Tokyo",
    "peru.md": "# Peru\n\nWhat is the capital of Peru? => Lima",
}


async def test_rows_carry_prompt_ground_truth_and_source(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", CORPUS)
    async with MockModelServer(lines_as_pairs) as server:
        summary = await generate(server, corpus, tmp_path / "qa", eval_fraction=0.25)
    rows = read_rows(tmp_path / "qa" / "train.jsonl") + read_rows(tmp_path / "qa" / "eval.jsonl")
    assert {"prompt": "What is the capital of France?", "ground_truth": "Paris",
            "type": "lookup", "style": "natural", "noise": [],
            "source": {"file": "france.txt", "chunk": 0,
                       "chunks": [{"file": "france.txt", "chunk": 0}]}} in rows  # fmt: skip
    assert len(rows) == summary.pairs_kept == summary.pairs_generated == 4
    assert (summary.documents, summary.chunks, summary.tasks_retried) == (3, 3, 0)
    assert summary.eval_documents == 1  # a quarter of the three chunks: one document
    assert len(server.requests) == 3
    prompt = server.requests[0].body["messages"][0]["content"]
    assert "Write up to 3 question-answer pairs" in prompt and "at most 8 words" in prompt


async def test_an_invalid_json_reply_is_retried_once_saying_why(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", {"a.txt": "What is two plus two? => four"})
    replies = iter(["Sure, here you go: Q1 ...", None])

    def policy(body: dict[str, Any]) -> str:
        return next(replies) or lines_as_pairs(body)

    async with MockModelServer(policy) as server:
        summary = await generate(server, corpus, tmp_path / "qa")
    assert summary.tasks_retried == 1 and summary.tasks_skipped == 0
    assert summary.pairs_kept == 1
    retry = server.requests[1].body["messages"][0]["content"]
    assert "previous reply could not be used: judge response did not contain a valid JSON" in retry


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"questions": []}, 'the object has no "pairs" list'),
        ({"pairs": ["What?"]}, "pairs[0] is not an object"),
        ({"pairs": [{"question": "Why?", "answer": ""}]}, "pairs[0] needs non-empty string"),
    ],
)
async def test_a_reply_of_the_wrong_shape_is_retried(
    tmp_path: Path, bad: dict[str, Any], reason: str
) -> None:
    corpus = write(tmp_path / "corpus", {"a.txt": "What is two plus two? => four"})
    replies = iter([json.dumps(bad)])

    def policy(body: dict[str, Any]) -> str:
        return next(replies, None) or lines_as_pairs(body)

    async with MockModelServer(policy) as server:
        summary = await generate(server, corpus, tmp_path / "qa")
    assert summary.tasks_retried == 1 and summary.pairs_kept == 1
    assert reason in server.requests[1].body["messages"][0]["content"]


async def test_a_chunk_refused_twice_is_skipped_counted_and_remembered(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", CORPUS)

    def policy(body: dict[str, Any]) -> str:
        return "no JSON here" if "Japan" in passage_of(body) else lines_as_pairs(body)

    async with MockModelServer(policy) as server:
        summary = await generate(server, corpus, tmp_path / "qa")
        assert len(server.requests) == 4  # two chunks once, the Japan chunk twice
    assert summary.tasks_skipped == 1 and summary.tasks_retried == 1
    assert summary.pairs_kept == 3
    async with MockModelServer(lines_as_pairs) as again:  # a re-run does not ask again
        second = await generate(again, corpus, tmp_path / "qa")
        assert again.requests == []
    assert second.tasks_cached == 3 and second.tasks_skipped == 1


async def test_failed_requests_are_counted_and_asked_again_by_a_rerun(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", CORPUS)
    async with MockModelServer(lines_as_pairs) as server:
        server.inject(Fault.status(400, error_code="model_not_found"), times=None)
        summary = await generate(server, corpus, tmp_path / "qa")
        assert len(server.requests) == 3  # a request error is not a bad reply: no retry
    assert summary.tasks_failed == 3 and summary.pairs_kept == 0
    assert "france.txt chunk 0: judge request failed" in summary.failures[0]
    assert read_rows(tmp_path / "qa" / "train.jsonl") == []
    async with MockModelServer(lines_as_pairs) as server:
        second = await generate(server, corpus, tmp_path / "qa")
    assert second.tasks_failed == 0 and second.tasks_cached == 0 and second.pairs_kept == 4


async def test_a_rerun_is_idempotent_and_asks_only_new_chunks(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", CORPUS)
    async with MockModelServer(lines_as_pairs) as server:
        await generate(server, corpus, tmp_path / "qa")
    first = (tmp_path / "qa" / "train.jsonl").read_bytes(), (tmp_path / "qa" / "eval.jsonl")
    write(corpus, {"kenya.txt": "What is the capital of Kenya? => Nairobi"})
    async with MockModelServer(lines_as_pairs) as server:
        summary = await generate(server, corpus, tmp_path / "qa")
        assert len(server.requests) == 1
        assert "Kenya" in passage_of(server.requests[0].body)
    assert summary.tasks_cached == 3 and summary.pairs_kept == 5
    (tmp_path / "qa" / "kenya-removed").mkdir()
    (corpus / "kenya.txt").unlink()
    async with MockModelServer(lines_as_pairs) as server:
        await generate(server, corpus, tmp_path / "qa")
        assert server.requests == []
    assert (tmp_path / "qa" / "train.jsonl").read_bytes() == first[0]


async def test_a_torn_checkpoint_line_only_redoes_that_chunk(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", CORPUS)
    async with MockModelServer(lines_as_pairs) as server:
        await generate(server, corpus, tmp_path / "qa")
    cache = tmp_path / "qa" / CACHE_NAME
    lines = cache.read_text().splitlines()
    cache.write_text("\n".join([*lines[:2], lines[2][:20]]) + "\n")
    async with MockModelServer(lines_as_pairs) as server:
        summary = await generate(server, corpus, tmp_path / "qa")
        assert len(server.requests) == 1
    assert summary.tasks_cached == 2 and summary.pairs_kept == 4


async def test_near_duplicate_questions_are_dropped_keeping_the_first(tmp_path: Path) -> None:
    corpus = write(
        tmp_path / "corpus",
        {
            "a.txt": "What is the capital of France? => Paris",
            "b.txt": "what is the capital of france => Paris\nHow tall is Mont Blanc? => 4808 m",
            "c.txt": "What is the capital city of France? => Paris",
        },
    )
    async with MockModelServer(lines_as_pairs) as server:
        summary = await generate(server, corpus, tmp_path / "qa", eval_fraction=0)
    prompts = [r["prompt"] for r in read_rows(tmp_path / "qa" / "train.jsonl")]
    assert prompts == ["What is the capital of France?", "How tall is Mont Blanc?"]
    assert summary.dropped == {"duplicate_question": 2}


async def test_answers_too_long_unsupported_or_over_the_limit_are_dropped(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "Who wrote it? => Jane Austen",
            "What happened? => the long story of how everything in the book came to pass",
            "Where is it set? => ~",
            "When was it published? => 1813",
            "How many sisters? => five",
        ]
    )
    corpus = write(tmp_path / "corpus", {"book.txt": text})
    async with MockModelServer(lines_as_pairs) as server:
        summary = await generate(server, corpus, tmp_path / "qa", pairs_per_chunk=4)
    assert summary.pairs_generated == 5
    assert summary.dropped == {"answer_not_in_chunk": 1, "answer_too_long": 1, "over_limit": 1}
    answers = [r["ground_truth"] for r in read_rows(tmp_path / "qa" / "train.jsonl")]
    assert answers == ["Jane Austen", "1813"]


def rows_for(documents: int, per_document: int = 1) -> list[GeneratedRow]:
    corpus = [
        QAPair(f"Question {d}.{p}?", "yes") for d in range(documents) for p in range(per_document)
    ]
    from benchmax.datagen import Document

    return [
        GeneratedRow(pair=pair, document=Document(f"doc{i // per_document}.txt", "x"), chunk=0)
        for i, pair in enumerate(corpus)
    ]


def test_the_split_is_by_document_seeded_and_near_the_fraction() -> None:
    rows = rows_for(10, per_document=2)
    train, evaluation = split_by_document(rows, eval_fraction=0.3, seed=7)
    assert len(evaluation) == 6 and len(train) == 14
    assert not {r.document.name for r in train} & {r.document.name for r in evaluation}
    assert split_by_document(rows, eval_fraction=0.3, seed=7) == (train, evaluation)
    choices = {
        frozenset(r.document.name for r in split_by_document(rows, eval_fraction=0.3, seed=s)[1])
        for s in range(6)
    }
    assert len(choices) > 1  # the seed decides which documents
    assert [r for r in rows if r in train] == train  # rows keep their order


def test_the_split_edges() -> None:
    rows = rows_for(4)
    assert split_by_document(rows, eval_fraction=0, seed=0) == (rows, [])
    big_documents = rows_for(3, per_document=4)  # 10% is under one document: still one
    assert len(split_by_document(big_documents, eval_fraction=0.1, seed=0)[1]) == 4
    single = rows_for(1, per_document=5)
    assert split_by_document(single, eval_fraction=0.5, seed=0) == (single, [])  # one stays
    train, evaluation = split_by_document(rows_for(3), eval_fraction=0.9, seed=0)
    assert len(train) == 1 and len(evaluation) == 2


async def test_at_most_concurrency_requests_are_in_flight(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", {f"d{i}.txt": f"Fact {i}? => {i}" for i in range(8)})
    in_flight = 0
    peak = 0

    async def policy(body: dict[str, Any]) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return lines_as_pairs(body)

    async with MockModelServer(policy) as server:
        summary = await generate(server, corpus, tmp_path / "qa", concurrency=2)
    assert summary.pairs_kept == 8
    assert 1 <= peak <= 2


def test_parse_qa_reply() -> None:
    reply = {
        "pairs": [
            {"question": " Who?\n", "answer": "  Ada  Lovelace "},
            {"question": "N?", "answer": 8},
        ]
    }
    assert parse_qa_reply(reply) == [QAPair("Who?", "Ada Lovelace"), QAPair("N?", "8")]
    assert parse_qa_reply({"pairs": []}) == []
    with pytest.raises(ReplyShapeError, match="pairs"):
        parse_qa_reply({"pairs": {"question": "a", "answer": "b"}})
    with pytest.raises(ReplyShapeError, match=r"pairs\[0\] needs"):
        parse_qa_reply({"pairs": [{"question": "a", "answer": True}]})


def test_the_prompt_holds_the_passage_and_the_rules() -> None:
    prompt = build_qa_prompt("  Mars has two moons.  ", source="space.md", pairs=2, max_words=5)
    assert "<passage>\nMars has two moons.\n</passage>" in prompt
    assert "Write up to 2 question-answer pairs" in prompt and "at most 5 words" in prompt
    assert (
        "from space.md" in prompt and '{"pairs": [{"question": "...", "answer": "..."}]}' in prompt
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pairs_per_chunk": 0}, "pairs_per_chunk"),
        ({"max_answer_words": 0}, "max_answer_words"),
        ({"min_answer_support": 1.5}, "min_answer_support"),
        ({"eval_fraction": 1.0}, "eval_fraction"),
        ({"seed": 1.5}, "seed"),
        ({"concurrency": 0}, "concurrency"),
        ({"temperature": float("nan")}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_generation_config_is_validated(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GenerationConfig(**options)
