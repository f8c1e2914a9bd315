"""The per-task checkpoint: one JSON line per finished request task, so a re-run skips it."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

__all__ = ["CACHE_NAME", "ChunkCache", "ChunkResult", "KeptPair", "chunk_key"]

CACHE_NAME = ".generate-qa-cache.jsonl"

logger = logging.getLogger(__name__)


def chunk_key(*parts: object) -> str:
    """A stable key for one chunk's request (prompt version, model, settings, text)."""
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("counts must be non-negative integers")
    return value


@dataclass(frozen=True, slots=True)
class KeptPair:
    """A pair that passed every check: ``question`` as asked (after its ``style``),
    ``natural`` the question as the model first wrote it."""

    question: str
    answer: str
    natural: str
    style: str

    def to_json(self) -> dict[str, str]:
        return {
            "question": self.question,
            "answer": self.answer,
            "natural": self.natural,
            "style": self.style,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> KeptPair:
        values = [data[name] for name in ("question", "answer", "natural", "style")]
        if not all(isinstance(value, str) and value for value in values):
            raise ValueError("a kept pair needs four non-empty strings")
        return cls(*(str(value) for value in values))


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What one request task (a chunk, a question type) gave: kept pairs, or ``invalid``
    when no usable reply came after a retry. ``generated`` pairs were read from replies
    (``regenerated`` of them asked again with feedback); ``dropped`` counts by reason."""

    key: str
    status: Literal["ok", "invalid"]
    pairs: tuple[KeptPair, ...] = ()
    reason: str = ""
    retried: bool = False
    generated: int = 0
    regenerated: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    style_fallbacks: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "status": self.status,
            "pairs": [pair.to_json() for pair in self.pairs],
            "reason": self.reason,
            "retried": self.retried,
            "generated": self.generated,
            "regenerated": self.regenerated,
            "dropped": dict(self.dropped),
            "style_fallbacks": self.style_fallbacks,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ChunkResult:
        raw_pairs, dropped = data["pairs"], data.get("dropped", {})
        if not isinstance(raw_pairs, list) or not isinstance(dropped, dict):
            raise ValueError("pairs must be a list and dropped an object")
        status = data["status"]
        if status not in ("ok", "invalid"):
            raise ValueError(f"unknown status {status!r}")
        return cls(
            key=str(data["key"]),
            status=status,
            pairs=tuple(KeptPair.from_json(p) for p in raw_pairs),
            reason=str(data.get("reason", "")),
            retried=bool(data.get("retried", False)),
            generated=_count(data.get("generated", 0)),
            regenerated=_count(data.get("regenerated", 0)),
            dropped={str(k): _count(v) for k, v in dropped.items()},
            style_fallbacks=_count(data.get("style_fallbacks", 0)),
        )


class ChunkCache:
    """Results by chunk key, read from and appended to ``directory/CACHE_NAME``.

    A line that does not parse (a run killed mid-write, even inside a UTF-8 character;
    a line that is not UTF-8; JSON nested too deeply to read) is ignored, and a whole
    line named in a warning (``file:line``): that chunk is redone. A torn last line (no
    newline) is cut off before the first new line is appended, so it cannot swallow it.
    Each line is passed through ``mask`` (secrets a model echoed) before it is written.
    """

    def __init__(self, directory: Path, mask: Callable[[str], str] | None = None) -> None:
        self.path = Path(directory) / CACHE_NAME
        self._mask = mask
        self._results: dict[str, ChunkResult] = {}
        self._whole: int | None = None  # bytes up to the last newline, when a line is torn
        if self.path.is_file():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                self._whole = data.rfind(b"\n") + 1
            lines = data.split(b"\n")
            for number, raw in enumerate(lines, start=1):
                try:
                    result = ChunkResult.from_json(json.loads(raw.decode("utf-8")))
                except (ValueError, KeyError, TypeError, AssertionError, RecursionError) as error:
                    if raw.strip() and number < len(lines):  # a torn last line: quietly
                        deep = isinstance(error, RecursionError)
                        reason = "nested too deeply" if deep else type(error).__name__
                        logger.warning(
                            "%s:%d: skipped, not a cache line (%s); that chunk is redone",
                            self.path,
                            number,
                            reason,
                        )
                    continue
                self._results[result.key] = result
        self._file: IO[str] | None = None

    def get(self, key: str) -> ChunkResult | None:
        return self._results.get(key)

    def add(self, result: ChunkResult) -> None:
        self._results[result.key] = result
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._whole is not None:  # drop the torn line before appending after it
                with self.path.open("r+b") as torn:
                    torn.truncate(self._whole)
                self._whole = None
            self._file = self.path.open("a", encoding="utf-8")
        line = json.dumps(result.to_json(), ensure_ascii=False)
        self._file.write((line if self._mask is None else self._mask(line)) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
