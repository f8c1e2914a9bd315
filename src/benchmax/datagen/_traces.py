"""``traces``: production logs into ``train.jsonl`` and ``eval.jsonl``, in bounded memory.

Two passes. The first streams every input file once: each logged reply is filtered,
scrubbed and written to a spill file beside the output, and a few numbers per row stay
in memory (``CandidateIndex``). The second decides from those numbers which rows to keep
(whole conversations, near-duplicates) and where each goes, then streams the spill into
the two files, asking the teacher for new ground truths on the way when there is one.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

import orjson

from benchmax.datagen._errors import DatagenError
from benchmax.datagen._holdout import eval_groups
from benchmax.datagen._relabel import teacher_reply
from benchmax.datagen._scratch import remove_stale_scratch
from benchmax.datagen._scrubbing import Scrubber
from benchmax.datagen._trace_formats import (
    LoggedCall,
    MalformedRecord,
    TraceFormat,
    detect_format,
    read_trace_file,
)
from benchmax.datagen._trace_rows import CandidateIndex, TracesConfig, candidate_of
from benchmax.rewards import Judge, JudgeError, cluster_texts

__all__ = ["TraceFile", "TracesError", "TracesSummary", "find_trace_files", "traces"]

TRACE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".log")
_MAX_MALFORMED_KEPT = 20
_BUCKET_LIMIT = 200
"""Near-duplicate candidates sharing a min-hash are clustered in runs of at most this many."""

type ProgressCallback = Callable[[str, int, int], None]


class TracesError(DatagenError, ValueError):
    """The traces cannot be processed: a malformed record under ``strict`` (the message
    starts with ``file:line``), no input files, or an unusable output directory."""


@dataclass(frozen=True, slots=True)
class TraceFile:
    """An input file, as rows name it, and its detected format."""

    path: Path
    name: str
    format: TraceFormat


@dataclass(frozen=True, slots=True)
class TracesSummary:
    """What ``traces`` read, dropped and wrote.

    ``calls`` logged replies were read from ``records`` records of ``files`` (lines, or
    a whole OTLP document, that held a reply or were malformed);
    ``malformed`` records were skipped (the first ones in ``malformed_examples``, as
    ``file:line: reason``). ``dropped`` counts rows left out by reason (``failed_call``,
    ``unsupported_content`` (a part with no chat equivalent, such as an OTel file or
    audio part), ``model_filtered``, ``no_history``, ``cut_by_length`` (the reply's
    finish reason says the output limit cut it), ``empty_reply`` (reasoning alone counts
    as empty), ``tool_only_reply``, ``reply_too_short``, ``too_long``, ``duplicate``,
    ``near_duplicate``, ``earlier_turn`` in whole-conversation mode); ``scrubbed`` the
    replacements by kind.
    ``relabeled``/``relabel_failed`` count teacher answers kept and requests that failed
    (the logged reply stays then); ``relabel_error`` is the first failure's reason, one
    line with the teacher's credentials masked (``""`` when none failed).
    """

    files: tuple[TraceFile, ...]
    records: int
    calls: int
    malformed: int
    malformed_examples: tuple[str, ...]
    dropped: Mapping[str, int]
    scrubbed: Mapping[str, int]
    train_rows: int
    eval_rows: int
    train_groups: int
    eval_groups: int
    relabeled: int
    relabel_failed: int
    train_path: Path
    eval_path: Path
    relabel_error: str = ""

    @property
    def rows(self) -> int:
        return self.train_rows + self.eval_rows

    def to_json(self) -> dict[str, object]:
        return {
            "files": [{"file": f.name, "format": f.format} for f in self.files],
            "records": self.records,
            "calls": self.calls,
            "malformed": self.malformed,
            "malformed_examples": list(self.malformed_examples),
            "dropped": dict(self.dropped),
            "scrubbed": dict(self.scrubbed),
            "rows": self.rows,
            "train_rows": self.train_rows,
            "eval_rows": self.eval_rows,
            "train_groups": self.train_groups,
            "eval_groups": self.eval_groups,
            "relabeled": self.relabeled,
            "relabel_failed": self.relabel_failed,
            "relabel_error": self.relabel_error,
            "train_path": str(self.train_path),
            "eval_path": str(self.eval_path),
        }


def find_trace_files(inputs: Sequence[Path], *, exclude: Iterable[Path] = ()) -> list[TraceFile]:
    """The files of ``inputs`` (files as given; directories searched recursively for
    ``.jsonl``, ``.json``, ``.ndjson`` and ``.log`` files, hidden ones skipped, in name
    order), each with its detected format. Raises ``TracesError`` for a missing input
    or no files, ``TraceFormatError`` for a file in no known format."""
    excluded = [Path(p).resolve() for p in exclude]
    found: list[tuple[Path, str]] = []
    for given in inputs:
        path = Path(given)
        if path.is_file():
            found.append((path, str(path)))
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                relative = file.relative_to(path)
                if (
                    file.is_file()
                    and file.suffix in TRACE_SUFFIXES
                    and not any(part.startswith(".") for part in relative.parts)
                    and not any(file.resolve().is_relative_to(e) for e in excluded)
                ):
                    found.append((file, str(file)))
        else:
            raise TracesError(f"input not found: {path}")
    if not found:
        raise TracesError(
            f"no trace files ({', '.join(TRACE_SUFFIXES)}) in {', '.join(map(str, inputs))}"
        )
    return [TraceFile(path, name, detect_format(path)) for path, name in found]


class _Reading:
    """Pass one: every file's calls, filtered and scrubbed, into the spill and the index."""

    def __init__(self, config: TracesConfig, on_progress: ProgressCallback | None) -> None:
        self.config = config
        self.on_progress = on_progress
        self.scrubber = Scrubber(config.scrub, phone_region=config.phone_region)
        self.index = CandidateIndex()
        self.dropped: Counter[str] = Counter()
        self.malformed: list[str] = []
        self.malformed_count = 0
        self.records = 0
        self.calls = 0
        self.best: dict[int, int] = {}
        self.stopped = False
        """Set from the event loop when ``traces`` is cancelled: the reading thread ends."""

    def run(self, files: Sequence[TraceFile], spill: IO[bytes]) -> None:
        total = sum(f.path.stat().st_size for f in files)
        done = 0
        progress = self.on_progress

        def on_bytes(position: int) -> None:
            if progress is not None:
                progress("reading", done + position, total)

        for trace_file in files:
            last_line = 0
            items = read_trace_file(
                trace_file.path, trace_file.format, name=trace_file.name, on_bytes=on_bytes
            )
            for item in items:
                if self.stopped:
                    return
                if item.line != last_line:
                    self.records += 1
                    last_line = item.line
                if isinstance(item, MalformedRecord):
                    self._malformed(item)
                else:
                    self._call(item, spill)
            done += trace_file.path.stat().st_size
            on_bytes(0)

    def _malformed(self, item: MalformedRecord) -> None:
        if self.config.strict:
            raise TracesError(f"{item} (--strict stops at the first malformed record)")
        self.malformed_count += 1
        if len(self.malformed) < _MAX_MALFORMED_KEPT:
            self.malformed.append(str(item))

    def _call(self, call: LoggedCall, spill: IO[bytes]) -> None:
        self.calls += 1
        candidate = candidate_of(call, self.config, self.scrubber, self.dropped)
        if candidate is None:
            return
        before = len(self.index)
        self.index.add(candidate, spill, self.dropped)
        if len(self.index) == before or self.config.unit != "conversation":
            return
        conversation = self.index.conversations[before]
        best = self.best.get(conversation)
        if best is None or self.index.history_lengths[before] > self.index.history_lengths[best]:
            self.best[conversation] = before


async def _near_duplicates(
    index: CandidateIndex, keep: bytearray, spill_path: Path, config: TracesConfig
) -> int:
    """Drop (in ``keep``) every row but the first of each cluster of near-duplicates.

    Rows sharing a band key (``band_keys``) form buckets; each bucket (in runs of at
    most ``_BUCKET_LIMIT`` rows, in reading order) is clustered by ``cluster_texts`` with
    the configured n-gram similarity, the clustering ``generate-qa`` uses for questions.
    """
    if config.dedupe is None:
        return 0
    dropped = 0
    with spill_path.open("rb") as spill:
        for hashes in index.bands:
            order = sorted((i for i in range(len(index)) if keep[i]), key=hashes.__getitem__)
            start = 0
            while start < len(order):
                end = start + 1
                while end < len(order) and hashes[order[end]] == hashes[order[start]]:
                    end += 1
                bucket = sorted(order[start:end])
                start = end
                for run_start in range(0, len(bucket), _BUCKET_LIMIT):
                    run = bucket[run_start : run_start + _BUCKET_LIMIT]
                    if len(run) > 1:
                        dropped += await _drop_clustered(run, index, keep, spill, config)
    return dropped


async def _drop_clustered(
    run: list[int], index: CandidateIndex, keep: bytearray, spill: IO[bytes], config: TracesConfig
) -> int:
    texts = []
    for i in run:
        spill.seek(index.offsets[i])
        texts.append(str(orjson.loads(spill.readline())[1]).lower())
    assert config.dedupe is not None
    clusters = await cluster_texts(texts, config.dedupe)
    seen: set[str] = set()
    dropped = 0
    for i, cluster in zip(run, clusters.cluster_ids, strict=True):
        if cluster in seen:
            keep[i] = 0
            dropped += 1
        else:
            seen.add(cluster)
    return dropped


def _group_keys(index: CandidateIndex) -> array[int]:
    """The split group of each conversation (``CandidateIndex.group``): every row of a
    conversation, and every conversation of a logged user, lands on one side."""
    return array("I", (index.group(c) for c in range(len(index.conversation_ids))))


class _Writer:
    """Writes the kept rows to a file (through a temporary name, moved into place)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self.file = self.temporary.open("wb")
        self.rows = 0

    def write(self, row: Mapping[str, object]) -> None:
        self.file.write(orjson.dumps(row) + b"\n")
        self.rows += 1

    def commit(self) -> None:
        self.file.close()
        self.temporary.replace(self.path)

    def discard(self) -> None:
        self.file.close()
        self.temporary.unlink(missing_ok=True)


def _unmasked(text: str) -> str:
    return text


class _Relabeler:
    def __init__(
        self, judge: Judge | None, config: TracesConfig, mask: Callable[[str], str]
    ) -> None:
        self.judge = judge
        self.config = config
        self.mask = mask
        self.relabeled = 0
        self.failed = 0
        self.first_error = ""

    async def relabel(self, rows: list[dict[str, object]]) -> None:
        if self.judge is None or not rows:
            return
        limit = asyncio.Semaphore(self.config.relabel_concurrency)

        async def one(row: dict[str, object]) -> None:
            assert self.judge is not None
            # The row as ``candidate_of`` built it: a list of messages and a source object.
            history = cast(
                "Sequence[Mapping[str, object]]",
                row.get("messages") or [{"role": "user", "content": row.get("prompt", "")}],
            )
            source = cast("Mapping[str, object]", row["source"])
            request_id = f"traces-{source.get('span_id') or source['line']}"
            async with limit:
                try:
                    reply = await teacher_reply(self.judge, history, request_id=request_id)
                except (JudgeError, ValueError) as error:
                    self.failed += 1
                    error_text = self.mask(str(error))[:300]
                    self.first_error = self.first_error or " ".join(error_text.split())
                    row["relabeled"] = {"model": self.judge.model, "error": error_text}
                    return
            self.relabeled += 1
            row["relabeled"] = {
                "model": self.judge.model,
                "logged_ground_truth": row["ground_truth"],
            }
            row["ground_truth"] = self.mask(reply)

        await asyncio.gather(*(one(row) for row in rows))


async def traces(
    inputs: Sequence[str | Path],
    output_dir: str | Path,
    config: TracesConfig | None = None,
    *,
    teacher: Judge | None = None,
    on_progress: ProgressCallback | None = None,
    mask: Callable[[str], str] | None = None,
) -> TracesSummary:
    """Write ``train.jsonl`` and ``eval.jsonl`` of dataset rows from production logs.

    ``inputs`` are files or directories (``find_trace_files``); each file's format is
    detected from its first record (``benchmax.datagen`` lists them). Every logged
    assistant reply becomes a row ``{"prompt" | "messages", "ground_truth", "source":
    {"file", "line", "span_id"?, "conversation_id", "user"?, "model"?, "time"?}}``, plus
    ``tool_calls`` when the reply called tools and ``tools`` when the request declared
    them (see ``TracesConfig`` for filters, dedupe, scrubbing and the split). A
    conversation without a logged id gets ``derived:<hash>`` of its opening messages.
    With ``teacher`` every kept row's ground truth is the teacher's reply, the logged one
    kept in ``relabeled.logged_ground_truth`` (``relabeled.error`` when the request
    failed and the logged reply stayed). ``mask`` (e.g. one replacing the teacher's key
    by ``***``) is applied to every teacher reply and relabel error before it is written.

    ``on_progress(stage, done, total)`` reports ``"reading"`` in bytes and ``"writing"``
    in rows. Memory stays bounded by a few numbers per row and per conversation; rows are
    spilled to a temporary file in ``output_dir``; what a run that was killed left there
    (its spill directory, half-written files, named by its process id) is removed when
    that process is gone.

    Raises ``TraceFormatError`` for a file in no known format (before anything is
    written), ``TracesError`` for a missing input or, under ``strict``, the first
    malformed record, ``OSError`` when the output cannot be written.
    """
    config = config or TracesConfig()
    output = Path(output_dir)
    files = find_trace_files([Path(p) for p in inputs], exclude=[output])
    output.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(output)
    reading = _Reading(config, on_progress)
    with tempfile.TemporaryDirectory(dir=output, prefix=f".traces-{os.getpid()}-") as scratch:
        spill_path = Path(scratch) / "rows.jsonl"
        with spill_path.open("wb") as spill:
            try:
                await asyncio.to_thread(reading.run, files, spill)
            except asyncio.CancelledError:
                reading.stopped = True  # Ctrl-C: the thread stops at its next record
                raise
        index = reading.index
        dropped = reading.dropped
        keep = bytearray(b"\x01" * len(index))
        if config.unit == "conversation":
            best = set(reading.best.values())
            for i in range(len(index)):
                if i not in best:
                    keep[i] = 0
                    dropped["earlier_turn"] += 1
        near = await _near_duplicates(index, keep, spill_path, config)
        if near:
            dropped["near_duplicate"] += near
        group_of_conversation = _group_keys(index)
        sizes: Counter[int] = Counter(
            group_of_conversation[index.conversations[i]] for i in range(len(index)) if keep[i]
        )
        to_eval = eval_groups(sizes, config.eval_fraction, config.seed)
        relabeler = _Relabeler(teacher, config, mask or _unmasked)
        train, evaluation = _Writer(output / "train.jsonl"), _Writer(output / "eval.jsonl")
        try:
            await _write_rows(
                spill_path, index, keep, group_of_conversation, to_eval, train, evaluation,
                relabeler, on_progress, kept=sum(keep),
            )  # fmt: skip
        except BaseException:
            train.discard()
            evaluation.discard()
            raise
        train.commit()
        evaluation.commit()
    return TracesSummary(
        files=tuple(files),
        records=reading.records,
        calls=reading.calls,
        malformed=reading.malformed_count,
        malformed_examples=tuple(reading.malformed),
        dropped=dict(sorted(dropped.items())),
        scrubbed=dict(sorted(reading.scrubber.counts.items())),
        train_rows=train.rows,
        eval_rows=evaluation.rows,
        train_groups=len(sizes) - len(to_eval),
        eval_groups=len(to_eval),
        relabeled=relabeler.relabeled,
        relabel_failed=relabeler.failed,
        train_path=train.path,
        eval_path=evaluation.path,
        relabel_error=relabeler.first_error,
    )


async def _write_rows(
    spill_path: Path,
    index: CandidateIndex,
    keep: bytearray,
    group_of_conversation: Sequence[int],
    to_eval: set[int],
    train: _Writer,
    evaluation: _Writer,
    relabeler: _Relabeler,
    on_progress: ProgressCallback | None,
    *,
    kept: int,
) -> None:
    batch: list[tuple[_Writer, dict[str, object]]] = []
    size = relabeler.config.relabel_concurrency * 8 if relabeler.judge is not None else 512
    done = 0

    async def flush() -> None:
        nonlocal done
        await relabeler.relabel([row for _, row in batch])
        for writer, row in batch:
            writer.write(row)
        done += len(batch)
        batch.clear()
        if on_progress is not None:
            on_progress("writing", done, kept)

    with spill_path.open("rb") as spill:
        for i, line in enumerate(spill):
            if not keep[i]:
                continue
            row = orjson.loads(line)[0]
            group = group_of_conversation[index.conversations[i]]
            batch.append((evaluation if group in to_eval else train, row))
            if len(batch) >= size:
                await flush()
    await flush()
