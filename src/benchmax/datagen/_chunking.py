"""Splitting a document into chunks: by headings and paragraphs, up to a size, with overlap."""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmax._value_checks import is_int_at_least
from benchmax.datagen._corpus import Document

__all__ = ["Chunk", "ChunkingConfig", "chunk_document"]

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """Chunks of at most ``max_chars`` characters; each repeats up to ``overlap_chars`` of
    the previous chunk's end (whole sentences) unless a heading starts a new section."""

    max_chars: int = 1500
    overlap_chars: int = 200

    def __post_init__(self) -> None:
        if not is_int_at_least(self.max_chars, 100):
            raise ValueError("max_chars must be an integer of at least 100")
        if not is_int_at_least(self.overlap_chars, 0) or self.overlap_chars >= self.max_chars:
            raise ValueError("overlap_chars must be a non-negative integer below max_chars")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Chunk ``index`` (from 0) of ``document``."""

    document: Document
    index: int
    text: str


def _blocks(text: str) -> list[tuple[bool, str]]:
    """Paragraphs as ``(is_heading, text)``; a heading line is its own block."""
    blocks: list[tuple[bool, str]] = []
    lines: list[str] = []

    def flush() -> None:
        if lines:
            blocks.append((False, "\n".join(lines).strip()))
            lines.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
        elif _HEADING.match(line):
            flush()
            blocks.append((True, line.strip()))
        else:
            lines.append(line.rstrip())
    flush()
    return [block for block in blocks if block[1]]


def _pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters at sentences, then words."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > limit:  # one very long sentence: cut at the last space
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > 0 else limit
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        joined = f"{current} {sentence}".strip()
        if len(joined) <= limit:
            current = joined
        else:
            pieces.append(current)
            current = sentence
    if current:
        pieces.append(current)
    return [piece for piece in pieces if piece]


def _tail(text: str, limit: int) -> str:
    """The last whole sentences of ``text`` that fit in ``limit`` characters ('' if none)."""
    if limit <= 0:
        return ""
    sentences = _SENTENCE_END.split(text)
    tail = ""
    for sentence in reversed(sentences):
        candidate = f"{sentence} {tail}".strip()
        if len(candidate) > limit:
            break
        tail = candidate
    return tail if tail != text.strip() else ""


def _size(parts: list[str]) -> int:
    return sum(len(part) for part in parts) + 2 * max(len(parts) - 1, 0)


def chunk_document(document: Document, config: ChunkingConfig | None = None) -> list[Chunk]:
    """``document`` as chunks of about ``max_chars`` characters at most, in reading order.

    Paragraphs (blank-line separated) are packed together; a Markdown heading starts a new
    chunk and stays with the text after it (the only way a chunk exceeds ``max_chars``); a
    paragraph longer than a chunk is cut at sentence ends. A chunk continuing the same
    section begins with the previous chunk's last sentences (at most ``overlap_chars``), so
    a fact on a boundary appears whole in one of them.
    """
    config = config or ChunkingConfig()
    limit = config.max_chars
    texts: list[str] = []
    headings: list[str] = []  # the headings opening the current chunk
    carry: list[str] = []  # sentences repeated from the previous chunk of this section
    body: list[str] = []

    def emit() -> None:
        texts.append("\n\n".join([*headings, *carry, *body]))

    for is_heading, block in _blocks(document.text):
        if is_heading:
            if body:
                emit()
                headings, body = [], []
            carry = []
            headings.append(block)
            continue
        for piece in _pieces(block, limit - config.overlap_chars):
            if body and _size([*headings, *carry, *body, piece]) > limit:
                emit()
                tail = _tail(body[-1], config.overlap_chars)
                carry = [tail] if tail and _size([tail, piece]) <= limit else []
                headings, body = [], []
            body.append(piece)
    if body:
        emit()
    return [Chunk(document=document, index=i, text=text) for i, text in enumerate(texts)]
