"""Reading a corpus: ``.txt``, ``.md`` and ``.jsonl`` documents from a file or a directory."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmax._value_checks import is_non_empty_str
from benchmax.datagen._errors import DatagenError
from benchmax.datagen._logged_calls import json_kind

__all__ = ["CORPUS_SUFFIXES", "CorpusError", "Document", "read_corpus"]

CORPUS_SUFFIXES = (".txt", ".md", ".jsonl")


class CorpusError(DatagenError, ValueError):
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


def _jsonl_documents(path: Path, label: str, text_field: str, skipped: list[str]) -> list[Document]:
    """One document per record; a record that is not a JSON object with a string
    ``text_field`` (null, a number, missing; a torn line) is skipped, named in ``skipped``
    as ``file:line: reason``. A file none of whose records has the field at all is a
    ``CorpusError`` (the field name is wrong, not the records)."""
    documents = []
    objects = named = 0
    for number, raw in enumerate(_read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as error:
            skipped.append(f"{label}:{number}: not valid JSON ({error.msg})")
            continue
        if not isinstance(row, dict):
            skipped.append(f"{label}:{number}: not a JSON object")
            continue
        objects += 1
        named += text_field in row
        value = row.get(text_field)
        if not isinstance(value, str):
            found = "missing" if text_field not in row else f"{json_kind(value)}, not a string"
            skipped.append(f"{label}:{number}: field {text_field!r} is {found}")
            continue
        if value.strip():
            documents.append(Document(file=label, text=value, line=number))
    if objects and not named:  # the field is not this file's: a wrong --text-field
        raise CorpusError(
            f"{path}: no record has a field {text_field!r} (choose it with --text-field)"
        )
    return documents


def read_corpus(
    path: Path,
    *,
    text_field: str = "text",
    exclude: Iterable[Path] = (),
    links_out: bool = False,
    skipped_links: list[Path] | None = None,
    skipped_records: list[str] | None = None,
) -> list[Document]:
    """Every non-empty document under ``path`` (a file or a directory, searched recursively).

    Hidden files and directories and anything under ``exclude`` are skipped, and so are
    symbolic links that lead out of the directory (appended to ``skipped_links`` when
    given) unless ``links_out``; a JSONL file gives one document per line, its text in
    ``text_field``, and a record without a string there (null, a number, missing, a line
    that is not JSON) is skipped and appended to ``skipped_records`` as
    ``file:line: reason``. Documents come sorted by file (then line). Raises
    ``CorpusError`` for a missing path, text that is not UTF-8, a JSONL file where no
    record has ``text_field``, or a corpus with no documents (naming the first skipped
    records).
    """
    skipped = skipped_records if skipped_records is not None else []
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
            documents.extend(_jsonl_documents(file, label, text_field, skipped))
        else:
            text = _read_text(file)
            if text.strip():
                documents.append(Document(file=label, text=text))
    if not documents:
        detail = ""
        if skipped:
            shown = "; ".join(skipped[:3])
            detail = (
                f" ({len(skipped)} JSONL records skipped: {shown}; choose the text field "
                "with --text-field)"
            )
        raise CorpusError(f"no non-empty {', '.join(CORPUS_SUFFIXES)} documents in {path}{detail}")
    return documents
