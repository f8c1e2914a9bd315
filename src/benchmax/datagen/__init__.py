"""Synthetic question/answer datasets from a corpus, written by any OpenAI-compatible model.

``await generate_qa(Path("corpus"), Path("qa"), Judge(model=..., base_url=..., auth=...))``
reads ``.txt``, ``.md`` and ``.jsonl`` documents, chunks them, asks the model (through
``Judge.request_json``: the same endpoint value, auth, retries and JSON parsing as a judge)
for question/answer pairs supported by each chunk, drops bad and near-duplicate pairs and
writes ``train.jsonl`` / ``eval.jsonl`` rows ``{"prompt", "ground_truth", "source"}`` split
by document. ``benchmax generate-qa`` is the command-line face.
"""

from benchmax.datagen._cache import CACHE_NAME
from benchmax.datagen._chunking import Chunk, ChunkingConfig, chunk_document
from benchmax.datagen._corpus import CORPUS_SUFFIXES, CorpusError, Document, read_corpus
from benchmax.datagen._generate import (
    GeneratedRow,
    GenerationConfig,
    GenerationSummary,
    generate_qa,
    qa_rows,
    split_by_document,
)
from benchmax.datagen._prompts import (
    PASSAGE_CLOSE,
    PASSAGE_OPEN,
    QAPair,
    ReplyShapeError,
    build_qa_prompt,
    parse_qa_reply,
)

__all__ = [
    "CACHE_NAME",
    "CORPUS_SUFFIXES",
    "PASSAGE_CLOSE",
    "PASSAGE_OPEN",
    "Chunk",
    "ChunkingConfig",
    "CorpusError",
    "Document",
    "GeneratedRow",
    "GenerationConfig",
    "GenerationSummary",
    "QAPair",
    "ReplyShapeError",
    "build_qa_prompt",
    "chunk_document",
    "generate_qa",
    "parse_qa_reply",
    "qa_rows",
    "read_corpus",
    "split_by_document",
]
