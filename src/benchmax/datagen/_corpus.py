"""Reading a corpus: ``.txt``, ``.md`` and ``.jsonl`` documents from a file or a directory."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmax._value_checks import is_non_empty_str

__all__ = ["CORPUS_SUFFIXES", "CorpusError", "Document", "read_corpus"]

CORPUS_SUFFIXES = (".txt", ".md", ".jsonl")


class CorpusError(ValueError):
    """The corpus cannot be read; the message names the file (and line, for JSONL)."""


@dataclass(frozen=True, slots=True)
class Document:
    """One source document: its file (relative to the corpus root), JSONL line, and text."""

    file: str
    text: str
    line: int | None = None

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.file):
            raise ValueError("document file must be a non-empty string")
        if not isinstance(self.text, str):
            raise TypeError("document text must be a string")

    @property
    def name(self) -> str:
        """``file``, or ``file:line`` for a JSONL record: unique within a corpus."""
        return self.file if self.line is None else f"{self.file}:{self.line}"


def _files(
    root: Path, exclude: Iterable[Path], *, links_out: bool, skipped: list[Path] | None
) -> list[Path]:
    excluded = [path.resolve() for path in exclude]
    inside = root.resolve()
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if not path.is_file() or path.suffix.lower() not in CORPUS_SUFFIXES:
            continue
        resolved = path.resolve()
        if any(resolved.is_relative_to(other) for other in excluded):
            continue
        if not links_out and not resolved.is_relative_to(inside):
            if skipped is not None:  # a link leading out of the corpus
                skipped.append(path)
            continue
        found.append(path)
    return found


def _read_text(path: Path) -> str:
    """The file's UTF-8 text, without the byte order mark some Windows tools write first."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"{path}: not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def _jsonl_documents(path: Path, label: str, text_field: str) -> list[Document]:
    documents = []
    for number, raw in enumerate(_read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as error:
            raise CorpusError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        value = row.get(text_field) if isinstance(row, dict) else None
        if not isinstance(value, str):
            raise CorpusError(
                f"{path}:{number}: no string field {text_field!r} (choose it with --text-field)"
            )
        if value.strip():
            documents.append(Document(file=label, text=value, line=number))
    return documents


def read_corpus(
    path: Path,
    *,
    text_field: str = "text",
    exclude: Iterable[Path] = (),
    links_out: bool = False,
    skipped_links: list[Path] | None = None,
) -> list[Document]:
    """Every non-empty document under ``path`` (a file or a directory, searched recursively).

    Hidden files and directories and anything under ``exclude`` are skipped, and so are
    symbolic links that lead out of the directory (appended to ``skipped_links`` when
    given) unless ``links_out``; a JSONL file
    gives one document per line, its text in ``text_field``. Documents come sorted by file
    (then line). Raises ``CorpusError`` for a missing path, unreadable text, a bad JSONL
    line, or a corpus with no documents.
    """
    path = Path(path)
    if not is_non_empty_str(text_field):
        raise CorpusError("text_field must be a non-empty string")
    if path.is_file():
        if path.suffix.lower() not in CORPUS_SUFFIXES:
            raise CorpusError(f"{path}: not a {', '.join(CORPUS_SUFFIXES)} file")
        files, root = [path], path.parent
    elif path.is_dir():
        files, root = _files(path, exclude, links_out=links_out, skipped=skipped_links), path
    else:
        raise CorpusError(f"corpus not found: {path}")
    documents: list[Document] = []
    for file in files:
        label = file.relative_to(root).as_posix()
        if file.suffix.lower() == ".jsonl":
            documents.extend(_jsonl_documents(file, label, text_field))
        else:
            text = _read_text(file)
            if text.strip():
                documents.append(Document(file=label, text=text))
    if not documents:
        raise CorpusError(f"no non-empty {', '.join(CORPUS_SUFFIXES)} documents in {path}")
    return documents
