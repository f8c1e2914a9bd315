"""``generate_qa``: question/answer datasets from a corpus, asked of a model chunk by chunk."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmax._file_replace import replace_file
from benchmax._value_checks import is_finite_number, is_int_at_least
from benchmax.datagen._cache import ChunkCache, ChunkResult
from benchmax.datagen._chunking import Chunk, ChunkingConfig, chunk_document
from benchmax.datagen._corpus import Document, read_corpus
from benchmax.datagen._holdout import eval_groups
from benchmax.datagen._linking import related_chunks
from benchmax.datagen._plan import (
    QUESTION_TYPES,
    STYLES,
    interleave,
    normalize_weights,
    spread_styles,
)
from benchmax.datagen._prompts import QAPair
from benchmax.datagen._styles import add_noise
from benchmax.datagen._tasks import RequestFailed, Task, TaskRunner, TaskSettings
from benchmax.rewards import Judge, NgramDiversityConfig, cluster_texts

__all__ = [
    "GeneratedRow",
    "GenerationConfig",
    "GenerationSummary",
    "generate_qa",
    "qa_rows",
    "split_by_document",
]

logger = logging.getLogger(__name__)

_MAX_FAILURES_KEPT = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationConfig:
    """How to turn a corpus into question/answer rows.

    Every chunk (``chunking``) has ``pairs_per_chunk`` question slots; ``types`` (weights of
    ``lookup``, ``multi_hop``, ``reasoning``, normalized) spreads the question types over all
    slots as evenly as the weights allow, and ``styles`` (``natural``, ``keyword``,
    ``expert``) spreads styles equally, shuffled with ``seed``. A multi-hop slot pairs its
    chunk with the most related chunk (BM25) of the same split side.

    Checks: an answer longer than ``max_answer_words`` words, or (lookup, multi-hop) with
    less than ``min_answer_support`` of its words in the cited chunks, is rejected; so is a
    question repeating a sentence (``trivial_overlap``: share of the sentence's words in
    one shared run; ``None`` turns it off) and, when ``grounding_check``, an answer the model
    finds unsupported by the cited chunks. With ``regenerate`` the rejected pairs are asked
    again once, with the reasons, before they are dropped. ``noise`` is the share of rows
    whose prompt gets a typo and an abbreviation (seeded). Questions whose
    character-trigram similarity reaches ``dedupe``'s threshold are near-duplicates (the
    first is kept). Documents go whole to eval until about ``eval_fraction`` of the chunks
    are there, chosen with ``seed``. At most ``concurrency`` tasks run at once;
    ``temperature`` and ``max_tokens`` go to the model.
    """

    pairs_per_chunk: int = 3
    types: Mapping[str, float] = field(default_factory=lambda: {"lookup": 1.0})
    styles: tuple[str, ...] = ("natural",)
    noise: float = 0.0
    max_answer_words: int = 8
    min_answer_support: float = 0.5
    trivial_overlap: float | None = 0.75
    grounding_check: bool = True
    regenerate: bool = True
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
        object.__setattr__(
            self, "types", normalize_weights(self.types, QUESTION_TYPES, "question types")
        )
        styles: object = self.styles
        if isinstance(styles, str) or not isinstance(styles, Sequence):
            raise TypeError("styles must be a sequence of style names")
        unknown = [style for style in self.styles if style not in STYLES]
        if not self.styles or unknown:
            named = f" (unknown: {', '.join(map(repr, unknown))})" if unknown else ""
            raise ValueError(f"styles must be one or more of {', '.join(STYLES)}{named}")
        object.__setattr__(self, "styles", tuple(dict.fromkeys(self.styles)))
        if not (is_finite_number(self.noise) and 0 <= self.noise <= 1):
            raise ValueError("noise must be within [0, 1]")
        if not is_int_at_least(self.max_answer_words, 1):
            raise ValueError("max_answer_words must be a positive integer")
        if not (is_finite_number(self.min_answer_support) and 0 <= self.min_answer_support <= 1):
            raise ValueError("min_answer_support must be within [0, 1]")
        if self.trivial_overlap is not None and not (
            is_finite_number(self.trivial_overlap) and 0 < self.trivial_overlap <= 1
        ):
            raise ValueError("trivial_overlap must be within (0, 1] or None")
        if not isinstance(self.grounding_check, bool) or not isinstance(self.regenerate, bool):
            raise TypeError("grounding_check and regenerate must be booleans")
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


def _chunk_source(document: Document, chunk: int) -> dict[str, object]:
    source: dict[str, object] = {"file": document.file, "chunk": chunk}
    if document.line is not None:
        source["line"] = document.line
    return source


@dataclass(frozen=True, slots=True)
class GeneratedRow:
    """One kept pair and where it came from; ``to_json`` is the dataset row.

    ``pair.question`` is the prompt as written to the dataset (styled, maybe noisy);
    ``natural`` the question as first written when that differs; ``linked`` the other
    chunks a multi-hop question cites, as ``(document, chunk index)``.
    """

    pair: QAPair
    document: Document
    chunk: int
    question_type: str = "lookup"
    style: str = "natural"
    noise: tuple[str, ...] = ()
    natural: str | None = None
    linked: tuple[tuple[Document, int], ...] = ()

    def to_json(self) -> dict[str, object]:
        source = _chunk_source(self.document, self.chunk)
        cited = [(self.document, self.chunk), *self.linked]
        source["chunks"] = [_chunk_source(document, index) for document, index in cited]
        row: dict[str, object] = {
            "prompt": self.pair.question,
            "ground_truth": self.pair.answer,
            "type": self.question_type,
            "style": self.style,
            "noise": list(self.noise),
            "source": source,
        }
        if self.natural is not None and self.natural != self.pair.question:
            row["original_prompt"] = self.natural
        return row


@dataclass(frozen=True, slots=True)
class GenerationSummary:
    """What ``generate_qa`` did.

    Tasks (one per chunk and question type with slots): ``tasks`` in all, ``tasks_cached``
    answered by an earlier run, ``tasks_retried`` whose first reply was refused,
    ``tasks_skipped`` refused twice, ``tasks_failed`` whose request failed (not cached: a
    re-run asks again; ``failures`` holds the first messages). Pairs: ``pairs_generated``
    read from replies, ``pairs_regenerated`` rejected and asked again with feedback,
    ``dropped`` by reason (``filters.DROP_REASONS`` and ``over_limit``, ``no_related_chunk``,
    ``grounding_unchecked``, ``duplicate_question``), ``train_rows``/``eval_rows`` written
    from ``train_documents``/``eval_documents``. ``type_targets`` (shares) against ``types``
    and ``styles`` (kept rows by name); ``noisy_rows``; ``style_fallbacks`` kept natural
    because their rewrite failed.
    """

    documents: int
    chunks: int
    tasks: int
    tasks_cached: int
    tasks_retried: int
    tasks_skipped: int
    tasks_failed: int
    pairs_generated: int
    pairs_regenerated: int
    dropped: Mapping[str, int]
    train_rows: int
    eval_rows: int
    train_documents: int
    eval_documents: int
    train_path: Path
    eval_path: Path
    type_targets: Mapping[str, float] = field(default_factory=dict)
    types: Mapping[str, int] = field(default_factory=dict)
    styles: Mapping[str, int] = field(default_factory=dict)
    noisy_rows: int = 0
    style_fallbacks: int = 0
    failures: tuple[str, ...] = ()
    links_skipped: int = 0
    """Symbolic links in the corpus that lead out of it, not read."""
    records_skipped: tuple[str, ...] = ()
    """JSONL corpus records without a string text field, as ``file:line: reason``."""

    @property
    def pairs_kept(self) -> int:
        return self.train_rows + self.eval_rows

    def achieved(self) -> dict[str, float]:
        """The share of kept rows of each targeted question type (0 for none kept)."""
        kept = self.pairs_kept
        return {
            name: (self.types.get(name, 0) / kept if kept else 0.0) for name in self.type_targets
        }

    def to_json(self) -> dict[str, object]:
        return {
            "documents": self.documents,
            "links_skipped": self.links_skipped,
            "records_skipped": list(self.records_skipped),
            "chunks": self.chunks,
            "tasks": self.tasks,
            "tasks_cached": self.tasks_cached,
            "tasks_retried": self.tasks_retried,
            "tasks_skipped": self.tasks_skipped,
            "tasks_failed": self.tasks_failed,
            "pairs_generated": self.pairs_generated,
            "pairs_regenerated": self.pairs_regenerated,
            "pairs_kept": self.pairs_kept,
            "dropped": dict(self.dropped),
            "type_targets": dict(self.type_targets),
            "types": dict(self.types),
            "types_achieved": self.achieved(),
            "styles": dict(self.styles),
            "noisy_rows": self.noisy_rows,
            "style_fallbacks": self.style_fallbacks,
            "train_rows": self.train_rows,
            "eval_rows": self.eval_rows,
            "train_documents": self.train_documents,
            "eval_documents": self.eval_documents,
            "train_path": str(self.train_path),
            "eval_path": str(self.eval_path),
            "failures": list(self.failures),
        }


async def _dedupe(rows: list[GeneratedRow], config: GenerationConfig) -> list[GeneratedRow]:
    """The first row of every cluster of near-duplicate questions (reading order)."""
    texts = [(row.natural or row.pair.question).lower() for row in rows]
    clusters = await cluster_texts(texts, config.dedupe)
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
    chosen = eval_groups(Counter(row.document.name for row in rows), eval_fraction, seed)
    train = [row for row in rows if row.document.name not in chosen]
    evaluation = [row for row in rows if row.document.name in chosen]
    return train, evaluation


def qa_rows(rows: Sequence[GeneratedRow]) -> list[dict[str, object]]:
    """The dataset rows ``{"prompt", "ground_truth", "source": {"file", "chunk"}}``."""
    return [row.to_json() for row in rows]


def _write_jsonl(path: Path, rows: Sequence[GeneratedRow], mask: Callable[[str], str]) -> None:
    replace_file(
        path,
        (mask(json.dumps(row, ensure_ascii=False) + "\n").encode() for row in qa_rows(rows)),
    )


def _unmasked(text: str) -> str:
    return text


def _plan_tasks(
    chunks: Sequence[Chunk], held_out: set[str], config: GenerationConfig, dropped: Counter[str]
) -> list[Task]:
    """The request tasks: each chunk's slots grouped by question type (``types`` spread over
    all slots), multi-hop ones linked within their split side; a multi-hop slot without a
    related chunk is counted in ``dropped`` as ``no_related_chunk``."""
    slots = len(chunks) * config.pairs_per_chunk
    types = interleave(config.types, slots)
    styles = spread_styles(config.styles, slots, config.seed)
    partner: dict[int, int | None] = {}
    if "multi_hop" in config.types:
        for side in (False, True):
            members = [i for i, c in enumerate(chunks) if (c.document.name in held_out) is side]
            found = related_chunks([chunks[i] for i in members])
            partner.update(
                (members[i], None if other is None else members[other])
                for i, other in enumerate(found)
            )
    tasks = []
    per_chunk = config.pairs_per_chunk
    for index, chunk in enumerate(chunks):
        own = range(index * per_chunk, (index + 1) * per_chunk)
        for question_type in QUESTION_TYPES:
            wanted = tuple(styles[slot] for slot in own if types[slot] == question_type)
            if not wanted:
                continue
            linked = None
            if question_type == "multi_hop":
                other = partner.get(index)
                if other is None:
                    dropped["no_related_chunk"] += len(wanted)
                    continue
                linked = chunks[other]
            tasks.append(Task(chunk, question_type, wanted, linked))
    return tasks


def _rows_of(task: Task, result: ChunkResult, config: GenerationConfig) -> list[GeneratedRow]:
    rows = []
    linked = tuple((c.document, c.index) for c in task.chunks[1:])
    for kept in result.pairs:
        question, noise = kept.question, tuple[str, ...]()
        if config.noise > 0:
            rng = random.Random(f"{config.seed}:{kept.natural}:{kept.style}")
            if rng.random() < config.noise:
                question, noise = add_noise(question, rng)
        rows.append(
            GeneratedRow(
                pair=QAPair(question=question, answer=kept.answer),
                document=task.chunk.document,
                chunk=task.chunk.index,
                question_type=task.question_type,
                style=kept.style,
                noise=noise,
                natural=kept.natural,
                linked=linked,
            )
        )
    return rows


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

    Documents (``read_corpus``) are chunked and split whole between train and eval
    (``eval_fraction`` of the chunks, seeded). Each chunk's question slots become request
    tasks by question type (``GenerationConfig``); for each task the model behind ``judge``
    is asked, through ``Judge.request_json``, for pairs in strict JSON (a reply of the wrong
    shape is asked again once, saying why, then the task is skipped). Pairs are checked
    (length, support, trivial retrieval, the model's grounding verdict), rejected ones are
    asked again once with the reasons, and kept ones are rewritten into their styles. Each
    finished task is checkpointed in ``output_dir`` and not asked again by a later run with
    the same settings. Rows get seeded noise, are de-duplicated and written by side.
    ``on_progress(done, total)`` is called as tasks finish.
    ``mask`` (e.g. one replacing the endpoint's key by ``***``) is applied to every line
    written (the checkpoint, ``train.jsonl``, ``eval.jsonl``) and to the failure texts of
    the summary. Symbolic links leading out of ``corpus`` are skipped and counted
    (``links_skipped``) unless ``links_out``; JSONL records without a string text field
    are skipped (``records_skipped``, ``file:line: reason``). Raises ``CorpusError`` for an
    unreadable corpus.
    """
    mask = mask or _unmasked
    config = config or GenerationConfig()
    output_dir = Path(output_dir)
    skipped_links: list[Path] = []
    skipped_records: list[str] = []
    documents = read_corpus(
        Path(corpus),
        text_field=text_field,
        exclude=[output_dir],
        links_out=links_out,
        skipped_links=skipped_links,
        skipped_records=skipped_records,
    )
    chunks = [chunk for doc in documents for chunk in chunk_document(doc, config.chunking)]
    held_out = eval_groups(
        Counter(chunk.document.name for chunk in chunks), config.eval_fraction, config.seed
    )
    dropped: Counter[str] = Counter()
    tasks = _plan_tasks(chunks, held_out, config, dropped)
    output_dir.mkdir(parents=True, exist_ok=True)
    cache = ChunkCache(output_dir, mask)
    settings = TaskSettings(
        max_answer_words=config.max_answer_words,
        min_answer_support=config.min_answer_support,
        trivial_overlap=config.trivial_overlap,
        grounding_check=config.grounding_check,
        regenerate=config.regenerate,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
    )
    runner = TaskRunner(judge, settings, cache)
    cached = sum(1 for task in tasks if cache.get(runner.key(task)) is not None)
    results: list[ChunkResult | None] = [None] * len(tasks)
    failures: list[str] = []
    pending = iter(enumerate(tasks))
    done = 0

    async def worker() -> None:  # a fixed pool of workers: no asyncio task per request task
        nonlocal done
        for index, task in pending:
            try:
                results[index] = await runner.run(task)
            except RequestFailed as error:
                chunk = task.chunk
                failures.append(f"{chunk.document.name} chunk {chunk.index}: {error}")
            done += 1
            if on_progress is not None:
                on_progress(done, len(tasks))

    if on_progress is not None:
        on_progress(0, len(tasks))
    try:
        await asyncio.gather(*(worker() for _ in range(min(config.concurrency, len(tasks)))))
    finally:
        cache.close()

    rows: list[GeneratedRow] = []
    fallbacks = 0
    for task, result in zip(tasks, results, strict=True):
        if result is None or result.status != "ok":
            continue
        dropped.update(result.dropped)
        fallbacks += result.style_fallbacks
        rows.extend(_rows_of(task, result, config))
    ok = [r for r in results if r is not None and r.status == "ok"]
    kept = await _dedupe(rows, config)
    if len(kept) < len(rows):
        dropped["duplicate_question"] += len(rows) - len(kept)
    train = [row for row in kept if row.document.name not in held_out]
    evaluation = [row for row in kept if row.document.name in held_out]
    train_path, eval_path = output_dir / "train.jsonl", output_dir / "eval.jsonl"
    _write_jsonl(train_path, train, mask)
    _write_jsonl(eval_path, evaluation, mask)
    return GenerationSummary(
        documents=len(documents),
        chunks=len(chunks),
        tasks=len(tasks),
        tasks_cached=cached,
        tasks_retried=sum(1 for r in results if r is not None and r.retried),
        tasks_skipped=sum(1 for r in results if r is not None and r.status == "invalid"),
        tasks_failed=sum(1 for r in results if r is None),
        pairs_generated=sum(r.generated for r in ok),
        pairs_regenerated=sum(r.regenerated for r in ok),
        dropped={reason: n for reason, n in sorted(dropped.items()) if n},
        train_rows=len(train),
        eval_rows=len(evaluation),
        train_documents=len({row.document.name for row in train}),
        eval_documents=len({row.document.name for row in evaluation}),
        train_path=train_path,
        eval_path=eval_path,
        type_targets=dict(config.types),
        types=dict(Counter(row.question_type for row in kept)),
        styles=dict(Counter(row.style for row in kept)),
        noisy_rows=sum(1 for row in kept if row.noise),
        style_fallbacks=fallbacks,
        failures=tuple(mask(text) for text in failures[:_MAX_FAILURES_KEPT]),
        links_skipped=len(skipped_links),
        records_skipped=tuple(skipped_records),
    )
