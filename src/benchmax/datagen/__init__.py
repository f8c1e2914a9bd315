"""Synthetic question/answer datasets from a corpus, written by any OpenAI-compatible model.

``await generate_qa(Path("corpus"), Path("qa"), Judge(model=..., base_url=..., auth=...))``
reads ``.txt``, ``.md`` and ``.jsonl`` documents, chunks them, asks the model (through
``Judge.request_json``: the same endpoint value, auth, retries and JSON parsing as a judge)
for question/answer pairs of the targeted types (lookup, multi-hop over BM25-linked chunks,
reasoning), checks them (length, support, trivial retrieval, the model's grounding verdict),
asks rejected ones again once with the reasons, rewrites questions into styles, adds
seeded noise, drops near-duplicates and writes ``train.jsonl`` / ``eval.jsonl`` rows
``{"prompt", "ground_truth", "type", "style", "noise", "source"}`` split by document.
``benchmax generate-qa`` is the command-line face.

``await traces(["logs/"], Path("data"))`` turns production logs (LiteLLM standard logging
payloads, ``{"request", "response"}`` lines, ``{"messages"}`` JSONL, OpenTelemetry GenAI
spans as OTLP JSON; ``TRACE_FORMATS``) into ``train.jsonl`` / ``eval.jsonl`` rows
``{"prompt" | "messages", "ground_truth", "source"}``: filtered, scrubbed of secrets and
personal data, de-duplicated and split by conversation, in bounded memory.
``score_logged_replies`` scores the eval split's logged replies with an environment's
rewards (the production model's baseline). ``benchmax traces`` is the command-line face.
"""

from benchmax.datagen._baseline import BASELINE_NAME, score_logged_replies
from benchmax.datagen._cache import CACHE_NAME
from benchmax.datagen._chunking import Chunk, ChunkingConfig, chunk_document
from benchmax.datagen._corpus import CORPUS_SUFFIXES, CorpusError, Document, read_corpus
from benchmax.datagen._errors import DatagenError
from benchmax.datagen._filters import (
    DROP_REASONS,
    GroundingVerdict,
    build_grounding_prompt,
    local_drop_reason,
    parse_grounding_reply,
    repeated_sentence,
)
from benchmax.datagen._generate import (
    GeneratedRow,
    GenerationConfig,
    GenerationSummary,
    generate_qa,
    qa_rows,
    split_by_document,
)
from benchmax.datagen._linking import related_chunks
from benchmax.datagen._plan import QUESTION_TYPES, STYLES, interleave, parse_weights
from benchmax.datagen._prompts import (
    PASSAGE_CLOSE,
    PASSAGE_OPEN,
    QAPair,
    ReplyShapeError,
    build_feedback_prompt,
    build_qa_prompt,
    parse_qa_reply,
)
from benchmax.datagen._relabel import build_relabel_prompt, teacher_reply
from benchmax.datagen._scrubbing import SCRUB_KINDS, Scrubber, luhn_valid
from benchmax.datagen._styles import NOISE_KINDS, add_noise, build_style_prompt, parse_style_reply
from benchmax.datagen._trace_formats import (
    TRACE_FORMATS,
    LoggedCall,
    MalformedRecord,
    TraceFormat,
    TraceFormatError,
    detect_format,
    read_trace_file,
)
from benchmax.datagen._trace_rows import TracesConfig
from benchmax.datagen._traces import (
    TraceFile,
    TracesError,
    TracesSummary,
    find_trace_files,
    traces,
)

__all__ = [
    "BASELINE_NAME",
    "CACHE_NAME",
    "CORPUS_SUFFIXES",
    "DROP_REASONS",
    "NOISE_KINDS",
    "PASSAGE_CLOSE",
    "PASSAGE_OPEN",
    "SCRUB_KINDS",
    "TRACE_FORMATS",
    "QUESTION_TYPES",
    "STYLES",
    "Chunk",
    "ChunkingConfig",
    "CorpusError",
    "DatagenError",
    "Document",
    "GeneratedRow",
    "GenerationConfig",
    "GenerationSummary",
    "LoggedCall",
    "MalformedRecord",
    "QAPair",
    "ReplyShapeError",
    "Scrubber",
    "TraceFile",
    "TraceFormat",
    "TraceFormatError",
    "TracesConfig",
    "TracesError",
    "TracesSummary",
    "build_qa_prompt",
    "build_relabel_prompt",
    "GroundingVerdict",
    "add_noise",
    "build_feedback_prompt",
    "build_grounding_prompt",
    "build_style_prompt",
    "chunk_document",
    "detect_format",
    "find_trace_files",
    "generate_qa",
    "luhn_valid",
    "interleave",
    "local_drop_reason",
    "parse_grounding_reply",
    "parse_qa_reply",
    "parse_style_reply",
    "parse_weights",
    "qa_rows",
    "read_corpus",
    "read_trace_file",
    "score_logged_replies",
    "related_chunks",
    "repeated_sentence",
    "split_by_document",
    "teacher_reply",
    "traces",
]
