"""The per-chunk checkpoint: one JSON line per answered chunk, so a re-run skips it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from benchmax.datagen._prompts import QAPair

__all__ = ["CACHE_NAME", "ChunkCache", "ChunkResult", "chunk_key"]

CACHE_NAME = ".generate-qa-cache.jsonl"


def chunk_key(*parts: object) -> str:
    """A stable key for one chunk's request (prompt version, model, settings, text)."""
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What the model gave for one chunk: accepted pairs, or ``invalid`` after a retry."""

    key: str
    status: Literal["ok", "invalid"]
    pairs: tuple[QAPair, ...] = ()
    reason: str = ""
    retried: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "status": self.status,
            "pairs": [{"question": p.question, "answer": p.answer} for p in self.pairs],
            "reason": self.reason,
            "retried": self.retried,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ChunkResult:
        raw_pairs = data["pairs"]
        assert isinstance(raw_pairs, list)
        status = data["status"]
        if status not in ("ok", "invalid"):
            raise ValueError(f"unknown status {status!r}")
        return cls(
            key=str(data["key"]),
            status=status,
            pairs=tuple(QAPair(p["question"], p["answer"]) for p in raw_pairs),
            reason=str(data.get("reason", "")),
            retried=bool(data.get("retried", False)),
        )


class ChunkCache:
    """Results by chunk key, read from and appended to ``directory/CACHE_NAME``.

    A line that does not parse (a run killed mid-write) is ignored: that chunk is redone.
    Each line is passed through ``mask`` (secrets a model echoed) before it is written.
    """

    def __init__(self, directory: Path, mask: Callable[[str], str] | None = None) -> None:
        self.path = Path(directory) / CACHE_NAME
        self._mask = mask
        self._results: dict[str, ChunkResult] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    result = ChunkResult.from_json(json.loads(line))
                except (ValueError, KeyError, TypeError, AssertionError):
                    continue
                self._results[result.key] = result
        self._file: IO[str] | None = None

    def get(self, key: str) -> ChunkResult | None:
        return self._results.get(key)

    def add(self, result: ChunkResult) -> None:
        self._results[result.key] = result
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        line = json.dumps(result.to_json(), ensure_ascii=False)
        self._file.write((line if self._mask is None else self._mask(line)) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
