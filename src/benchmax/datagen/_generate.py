"""``generate_qa``: question/answer datasets from a corpus, asked of a model chunk by chunk."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax._file_replace import replace_file
from benchmax._value_checks import is_finite_number, is_int_at_least
from benchmax.datagen._cache import ChunkCache, ChunkResult, chunk_key
from benchmax.datagen._chunking import Chunk, ChunkingConfig, chunk_document
from benchmax.datagen._corpus import Document, read_corpus
from benchmax.datagen._prompts import (
    PROMPT_VERSION,
    QAPair,
    ReplyShapeError,
    build_qa_prompt,
    build_retry_prompt,
    parse_qa_reply,
)
from benchmax.rewards import Judge, JudgeError, NgramDiversityConfig, cluster_texts

__all__ = [
    "GeneratedRow",
    "GenerationConfig",
    "GenerationSummary",
    "generate_qa",
    "qa_rows",
    "split_by_document",
]

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
_MAX_FAILURES_KEPT = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationConfig:
    """How to turn a corpus into question/answer rows.

    ``pairs_per_chunk`` pairs are asked per chunk (``chunking``); an answer longer than
    ``max_answer_words`` words, or with less than ``min_answer_support`` of its words in the
    chunk, is dropped; questions whose character-trigram similarity reaches ``dedupe``'s
    threshold are near-duplicates (the first is kept). Documents go whole to eval until
    about ``eval_fraction`` of the rows are there, chosen with ``seed``. At most
    ``concurrency`` requests are in flight; ``temperature`` and ``max_tokens`` go to the model.
    """

    pairs_per_chunk: int = 3
    max_answer_words: int = 8
    min_answer_support: float = 0.5
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    dedupe: NgramDiversityConfig = field(
        default_factory=lambda: NgramDiversityConfig(n=3, similarity_threshold=0.75)
    )
    eval_fraction: float = 0.2
    seed: int = 0
    concurrency: int = 4
    temperature: float = 0.0
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not is_int_at_least(self.pairs_per_chunk, 1):
            raise ValueError("pairs_per_chunk must be a positive integer")
        if not is_int_at_least(self.max_answer_words, 1):
            raise ValueError("max_answer_words must be a positive integer")
        if not (is_finite_number(self.min_answer_support) and 0 <= self.min_answer_support <= 1):
            raise ValueError("min_answer_support must be within [0, 1]")
        if not isinstance(self.chunking, ChunkingConfig):
            raise TypeError("chunking must be a ChunkingConfig")
        if not isinstance(self.dedupe, NgramDiversityConfig):
            raise TypeError("dedupe must be an NgramDiversityConfig")
        if not (is_finite_number(self.eval_fraction) and 0 <= self.eval_fraction < 1):
            raise ValueError("eval_fraction must be within [0, 1)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError("seed must be an integer")
        if not is_int_at_least(self.concurrency, 1):
            raise ValueError("concurrency must be a positive integer")
        if not is_finite_number(self.temperature):
            raise ValueError("temperature must be a finite number")
        if self.max_tokens is not None and not is_int_at_least(self.max_tokens, 1):
            raise ValueError("max_tokens must be a positive integer or None")


@dataclass(frozen=True, slots=True)
class GeneratedRow:
    """One kept pair and where it came from; ``to_json`` is the dataset row."""

    pair: QAPair
    document: Document
    chunk: int

    def to_json(self) -> dict[str, Any]:
        source: dict[str, Any] = {"file": self.document.file, "chunk": self.chunk}
        if self.document.line is not None:
            source["line"] = self.document.line
        return {"prompt": self.pair.question, "ground_truth": self.pair.answer, "source": source}


@dataclass(frozen=True, slots=True)
class GenerationSummary:
    """What ``generate_qa`` did.

    Chunks: ``chunks`` in all, ``chunks_cached`` answered by an earlier run, ``chunks_retried``
    whose first reply was refused, ``chunks_skipped`` refused twice, ``chunks_failed`` whose
    request failed (not cached: a re-run asks again; ``failures`` holds the first messages).
    Pairs: ``pairs_generated`` accepted from replies, ``dropped`` by reason
    (``answer_too_long``, ``answer_not_in_chunk``, ``over_limit``, ``duplicate_question``),
    ``train_rows``/``eval_rows`` written from ``train_documents``/``eval_documents``.
    """

    documents: int
    chunks: int
    chunks_cached: int
    chunks_retried: int
    chunks_skipped: int
    chunks_failed: int
    pairs_generated: int
    dropped: Mapping[str, int]
    train_rows: int
    eval_rows: int
    train_documents: int
    eval_documents: int
    train_path: Path
    eval_path: Path
    failures: tuple[str, ...] = ()
    links_skipped: int = 0
    """Symbolic links in the corpus that lead out of it, not read."""

    @property
    def pairs_kept(self) -> int:
        return self.train_rows + self.eval_rows

    def to_json(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "links_skipped": self.links_skipped,
            "chunks": self.chunks,
            "chunks_cached": self.chunks_cached,
            "chunks_retried": self.chunks_retried,
            "chunks_skipped": self.chunks_skipped,
            "chunks_failed": self.chunks_failed,
            "pairs_generated": self.pairs_generated,
            "pairs_kept": self.pairs_kept,
            "dropped": dict(self.dropped),
            "train_rows": self.train_rows,
            "eval_rows": self.eval_rows,
            "train_documents": self.train_documents,
            "eval_documents": self.eval_documents,
            "train_path": str(self.train_path),
            "eval_path": str(self.eval_path),
            "failures": list(self.failures),
        }


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _drop_reason(pair: QAPair, chunk: Chunk, config: GenerationConfig) -> str | None:
    answer_words = _words(pair.answer)
    if len(pair.answer.split()) > config.max_answer_words:
        return "answer_too_long"
    chunk_words = set(_words(chunk.text))
    supported = sum(1 for word in answer_words if word in chunk_words)
    if not answer_words or supported / len(answer_words) < config.min_answer_support:
        return "answer_not_in_chunk"
    return None


class _Asker:
    """Asks the model about chunks through the cache, one reply (and one retry) per chunk."""

    def __init__(self, judge: Judge, config: GenerationConfig, cache: ChunkCache) -> None:
        self.judge = judge
        self.config = config
        self.cache = cache
        self.failures: list[str] = []

    def key(self, chunk: Chunk) -> str:
        config = self.config
        return chunk_key(
            PROMPT_VERSION,
            self.judge.model,
            config.pairs_per_chunk,
            config.max_answer_words,
            config.temperature,
            chunk.document.name,
            chunk.text,
        )

    async def _request(self, prompt: str, request_id: str) -> list[QAPair]:
        reply, _raw = await self.judge.request_json(
            prompt,
            request_id=request_id,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
        )
        return parse_qa_reply(reply)

    async def ask(self, chunk: Chunk) -> ChunkResult | None:
        """The chunk's result (cached, fresh, or ``invalid``); ``None`` if the request failed."""
        key = self.key(chunk)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        prompt = build_qa_prompt(
            chunk.text,
            source=chunk.document.name,
            pairs=self.config.pairs_per_chunk,
            max_words=self.config.max_answer_words,
        )
        request_id = f"generate-qa-{key[:16]}"
        reason = ""
        for attempt in range(2):
            try:
                pairs = await self._request(prompt, f"{request_id}-{attempt}")
            except ReplyShapeError as error:
                reason = str(error)
            except JudgeError as error:
                if not isinstance(error.__cause__, ValueError):  # transport, auth, status
                    self.failures.append(f"{chunk.document.name} chunk {chunk.index}: {error}")
                    return None
                reason = str(error.__cause__)  # not a JSON object, or empty
            else:
                result = ChunkResult(key, "ok", tuple(pairs), retried=attempt > 0)
                self.cache.add(result)
                return result
            logger.warning(
                "generate_qa.reply_refused file=%s chunk=%d attempt=%d: %s",
                chunk.document.name,
                chunk.index,
                attempt + 1,
                reason,
            )
            prompt = build_retry_prompt(prompt, reason)
        result = ChunkResult(key, "invalid", reason=reason, retried=True)
        self.cache.add(result)
        return result


async def _dedupe(rows: list[GeneratedRow], config: GenerationConfig) -> list[GeneratedRow]:
    """The first row of every cluster of near-duplicate questions (reading order)."""
    clusters = await cluster_texts([row.pair.question.lower() for row in rows], config.dedupe)
    seen: set[str] = set()
    kept = []
    for row, cluster in zip(rows, clusters.cluster_ids, strict=True):
        if cluster not in seen:
            seen.add(cluster)
            kept.append(row)
    return kept


def split_by_document(
    rows: Sequence[GeneratedRow], *, eval_fraction: float, seed: int
) -> tuple[list[GeneratedRow], list[GeneratedRow]]:
    """``(train, eval)``: whole documents, in an order shuffled with ``seed``, go to eval when
    they bring its share of the rows closer to ``eval_fraction``. With a positive fraction and
    two or more documents, eval gets at least one document and train keeps at least one.
    Rows keep their order; no document is in both."""
    per_document = Counter(row.document.name for row in rows)
    names = sorted(per_document)
    random.Random(seed).shuffle(names)
    target = eval_fraction * len(rows)
    chosen: set[str] = set()
    held = 0
    for name in names:
        if len(chosen) >= len(names) - 1:
            break
        if abs(held + per_document[name] - target) < abs(held - target):
            chosen.add(name)
            held += per_document[name]
    if not chosen and eval_fraction > 0 and len(names) > 1:
        chosen.add(min(names, key=per_document.__getitem__))  # the smallest, in shuffled order
    train = [row for row in rows if row.document.name not in chosen]
    evaluation = [row for row in rows if row.document.name in chosen]
    return train, evaluation


def qa_rows(rows: Sequence[GeneratedRow]) -> list[dict[str, Any]]:
    """The dataset rows ``{"prompt", "ground_truth", "source": {"file", "chunk"}}``."""
    return [row.to_json() for row in rows]


def _write_jsonl(path: Path, rows: Sequence[GeneratedRow], mask: Callable[[str], str]) -> None:
    replace_file(
        path,
        (mask(json.dumps(row, ensure_ascii=False) + "\n").encode() for row in qa_rows(rows)),
    )


def _unmasked(text: str) -> str:
    return text


async def generate_qa(
    corpus: Path,
    output_dir: Path,
    judge: Judge,
    config: GenerationConfig | None = None,
    *,
    text_field: str = "text",
    on_progress: Callable[[int, int], None] | None = None,
    mask: Callable[[str], str] | None = None,
    links_out: bool = False,
) -> GenerationSummary:
    """Write ``train.jsonl`` and ``eval.jsonl`` of questions about ``corpus`` to ``output_dir``.

    Documents (``read_corpus``) are chunked; for each chunk the model behind ``judge`` is
    asked, through ``Judge.request_json``, for ``pairs_per_chunk`` pairs in strict JSON. A
    reply that is not a JSON object of the right shape is asked again once (saying why),
    then the chunk is skipped. Answered chunks are checkpointed in ``output_dir`` and not
    asked again by a later run with the same settings. Pairs are filtered, de-duplicated
    and split by document (``split_by_document``). ``on_progress(done, total)`` is called as
    chunks finish. ``mask`` (e.g. one replacing the endpoint's key by ``***``) is applied
    to every line written (the checkpoint, ``train.jsonl``, ``eval.jsonl``) and to the
    failure texts of the summary. Symbolic links leading out of ``corpus`` are skipped and
    counted (``links_skipped``) unless ``links_out``. Raises ``CorpusError`` for an
    unreadable corpus.
    """
    mask = mask or _unmasked
    config = config or GenerationConfig()
    output_dir = Path(output_dir)
    skipped_links: list[Path] = []
    documents = read_corpus(
        Path(corpus),
        text_field=text_field,
        exclude=[output_dir],
        links_out=links_out,
        skipped_links=skipped_links,
    )
    chunks = [chunk for doc in documents for chunk in chunk_document(doc, config.chunking)]
    output_dir.mkdir(parents=True, exist_ok=True)
    cache = ChunkCache(output_dir, mask)
    asker = _Asker(judge, config, cache)
    cached = sum(1 for chunk in chunks if cache.get(asker.key(chunk)) is not None)
    results: list[ChunkResult | None] = [None] * len(chunks)
    pending = iter(enumerate(chunks))
    done = 0

    async def worker() -> None:  # a fixed pool of workers: no task per chunk
        nonlocal done
        for index, chunk in pending:
            results[index] = await asker.ask(chunk)
            done += 1
            if on_progress is not None:
                on_progress(done, len(chunks))

    if on_progress is not None:
        on_progress(0, len(chunks))
    try:
        await asyncio.gather(*(worker() for _ in range(min(config.concurrency, len(chunks)))))
    finally:
        cache.close()

    dropped: Counter[str] = Counter()
    rows: list[GeneratedRow] = []
    for chunk, result in zip(chunks, results, strict=True):
        if result is None or result.status != "ok":
            continue
        for number, pair in enumerate(result.pairs):
            if number >= config.pairs_per_chunk:
                dropped["over_limit"] += 1
                continue
            reason = _drop_reason(pair, chunk, config)
            if reason is not None:
                dropped[reason] += 1
            else:
                rows.append(GeneratedRow(pair=pair, document=chunk.document, chunk=chunk.index))
    generated = sum(len(r.pairs) for r in results if r is not None and r.status == "ok")
    kept = await _dedupe(rows, config)
    if len(kept) < len(rows):
        dropped["duplicate_question"] += len(rows) - len(kept)
    train, evaluation = split_by_document(
        kept, eval_fraction=config.eval_fraction, seed=config.seed
    )
    train_path, eval_path = output_dir / "train.jsonl", output_dir / "eval.jsonl"
    _write_jsonl(train_path, train, mask)
    _write_jsonl(eval_path, evaluation, mask)
    return GenerationSummary(
        documents=len(documents),
        chunks=len(chunks),
        chunks_cached=cached,
        chunks_retried=sum(1 for r in results if r is not None and r.retried),
        chunks_skipped=sum(1 for r in results if r is not None and r.status == "invalid"),
        chunks_failed=sum(1 for r in results if r is None),
        pairs_generated=generated,
        dropped=dict(sorted(dropped.items())),
        train_rows=len(train),
        eval_rows=len(evaluation),
        train_documents=len({row.document.name for row in train}),
        eval_documents=len({row.document.name for row in evaluation}),
        train_path=train_path,
        eval_path=eval_path,
        failures=tuple(mask(text) for text in asker.failures[:_MAX_FAILURES_KEPT]),
        links_skipped=len(skipped_links),
    )
