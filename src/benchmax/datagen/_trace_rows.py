"""From a logged call to a candidate dataset row: filters, scrubbing, keys for dedupe and split.

Candidates are spilled to disk as they are made; only a few numbers per candidate stay
in memory (``CandidateIndex``), so the log's size does not bound the memory used.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import re
import zlib
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Literal, cast

import orjson

from benchmax._message_content import split_reasoning
from benchmax._value_checks import is_finite_number, is_int_at_least
from benchmax.datagen._scrubbing import SCRUB_KINDS, Scrubber
from benchmax.datagen._trace_formats import LoggedCall
from benchmax.rewards import NgramDiversityConfig
from benchmax.rewards.text import message_text

__all__ = ["CUT_FINISH_REASONS", "Candidate", "CandidateIndex", "TracesConfig", "candidate_of"]

_WORD = re.compile(r"\w+")
CUT_FINISH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})
"""Finish reasons (lower-cased) of a reply the output limit cut: OpenAI-compatible servers
and the OTel GenAI conventions say ``length``, Anthropic ``max_tokens``, Gemini
``MAX_TOKENS``, the Responses API ``max_output_tokens``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TracesConfig:
    """How logged calls become dataset rows.

    ``unit``: ``"turn"`` makes every logged assistant reply a row (the history before it
    as ``prompt`` or ``messages``); ``"conversation"`` keeps one row per conversation,
    its longest logged history and the reply that ends it. Dropped: failed calls unless
    ``keep_failed`` (a failed call with no reply is dropped anyway), replies without text
    (``keep_tool_only`` keeps those that call tools), replies shorter than
    ``min_reply_chars``, rows longer than ``max_chars`` (history and reply text), models
    matching none of ``models`` (shell patterns; empty: all), exact duplicates, and
    near-duplicates: rows whose last user message and reply reach ``dedupe``'s
    character n-gram similarity (``None``: exact duplicates only). ``scrub`` lists the
    kinds of secrets and personal data replaced (``SCRUB_KINDS``), phone numbers read in
    ``phone_region``. Conversations (or users, where logged) go whole to eval until about
    ``eval_fraction`` of the rows are there, chosen with ``seed``. ``strict`` stops at the
    first malformed record. ``relabel_concurrency`` teacher requests run at once.
    """

    unit: Literal["turn", "conversation"] = "turn"
    keep_failed: bool = False
    keep_tool_only: bool = False
    min_reply_chars: int = 1
    max_chars: int | None = None
    models: tuple[str, ...] = ()
    dedupe: NgramDiversityConfig | None = field(
        default_factory=lambda: NgramDiversityConfig(n=3, similarity_threshold=0.75)
    )
    scrub: tuple[str, ...] = SCRUB_KINDS
    phone_region: str = "US"
    eval_fraction: float = 0.2
    seed: int = 0
    strict: bool = False
    relabel_concurrency: int = 4

    def __post_init__(self) -> None:
        if self.unit not in ("turn", "conversation"):
            raise ValueError("unit must be 'turn' or 'conversation'")
        if not is_int_at_least(self.min_reply_chars, 0):
            raise ValueError("min_reply_chars must be a non-negative integer")
        if self.max_chars is not None and not is_int_at_least(self.max_chars, 1):
            raise ValueError("max_chars must be a positive integer or None")
        if not all(isinstance(pattern, str) and pattern for pattern in self.models):
            raise ValueError("models must be non-empty patterns")
        if self.dedupe is not None and not isinstance(self.dedupe, NgramDiversityConfig):
            raise TypeError("dedupe must be an NgramDiversityConfig or None")
        unknown = set(self.scrub) - set(SCRUB_KINDS)
        if unknown:
            raise ValueError(f"unknown scrub kind(s) {sorted(unknown)}; known: {SCRUB_KINDS}")
        if not (isinstance(self.phone_region, str) and len(self.phone_region) == 2):
            raise ValueError("phone_region must be a two-letter region code")
        if not (is_finite_number(self.eval_fraction) and 0 <= self.eval_fraction < 1):
            raise ValueError("eval_fraction must be within [0, 1)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError("seed must be an integer")
        if not is_int_at_least(self.relabel_concurrency, 1):
            raise ValueError("relabel_concurrency must be a positive integer")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A row that passed the filters, with the keys the later stages need."""

    row: dict[str, object]
    exact_key: int
    conversation: str
    """As logged (a split key, never written); ``row["source"]`` shows its pseudonym."""
    user: str | None
    near_text: str
    history_length: int


def _text(message: Mapping[str, object]) -> str:
    return message_text(message.get("content"))


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def candidate_of(
    call: LoggedCall, config: TracesConfig, scrubber: Scrubber, dropped: Counter[str]
) -> Candidate | None:
    """The call as a candidate row, or ``None`` (the reason counted in ``dropped``)."""
    if call.reply is None or (call.failed and not config.keep_failed):
        dropped["failed_call"] += 1
        return None
    if call.unsupported is not None:
        dropped["unsupported_content"] += 1
        return None
    if config.models and not (
        call.model and any(fnmatch.fnmatchcase(call.model, p) for p in config.models)
    ):
        dropped["model_filtered"] += 1
        return None
    if not call.history:
        dropped["no_history"] += 1
        return None
    if (call.finish_reason or "").lower() in CUT_FINISH_REASONS:
        dropped["cut_by_length"] += 1  # a reply the output limit cut is no ground truth
        return None
    # Reasoning written in the reply (<think>...</think>) is never part of a ground truth.
    reply_text = split_reasoning(_text(call.reply))[0].strip()
    tool_calls = call.reply.get("tool_calls") or None
    if not reply_text:
        if not tool_calls:
            dropped["empty_reply"] += 1
            return None
        if not config.keep_tool_only:
            dropped["tool_only_reply"] += 1
            return None
    elif len(reply_text) < config.min_reply_chars:
        dropped["reply_too_short"] += 1
        return None
    history_chars = sum(len(_text(m)) for m in call.history)
    if config.max_chars is not None and history_chars + len(reply_text) > config.max_chars:
        dropped["too_long"] += 1
        return None
    # Scrubbing keeps the shape: a list of message dicts stays one.
    history = cast("list[dict[str, object]]", scrubber.value([dict(m) for m in call.history]))
    reply_text = scrubber.text(reply_text)
    if tool_calls is not None:
        tool_calls = scrubber.value(tool_calls)
    # Grouping keys stay as logged (in memory only); what rows show is scrubbed.
    user = call.user or None
    row: dict[str, object] = {}
    first = history[0]
    if len(history) == 1 and first.get("role") == "user" and isinstance(first.get("content"), str):
        row["prompt"] = first["content"]
    else:
        row["messages"] = history
    row["ground_truth"] = reply_text
    if tool_calls:
        row["tool_calls"] = tool_calls
    if call.tools:
        row["tools"] = scrubber.value(list(call.tools))
    conversation = call.conversation_id or _derived_conversation(history)
    source: dict[str, object] = {"file": call.file}
    if call.span_id is not None:
        source["span_id"] = call.span_id
    source["line"] = call.line
    source["conversation_id"] = scrubber.pseudonym(conversation)
    shown_user = None if user is None else scrubber.pseudonym(user)
    for key, value in (("user", shown_user), ("model", call.model), ("time", call.time)):
        if value is not None:
            source[key] = value
    row["source"] = source
    exact = _digest(orjson.dumps([history, reply_text, tool_calls], option=orjson.OPT_SORT_KEYS))
    last_user = next(
        (_text(m) for m in reversed(history) if m.get("role") == "user"), _text(history[-1])
    )
    return Candidate(
        row=row,
        exact_key=exact,
        conversation=conversation,
        user=user,
        near_text=f"{last_user}\n{reply_text}"[:NEAR_TEXT_CHARS],
        history_length=len(history),
    )


def _derived_conversation(history: Sequence[Mapping[str, object]]) -> str:
    """A conversation id for logs without one: calls of one conversation repeat its
    opening (system prompt and first user message) in every request."""
    system = next((_text(m) for m in history if m.get("role") in ("system", "developer")), "")
    first_user = next((_text(m) for m in history if m.get("role") == "user"), "")
    digest = hashlib.blake2b(f"{system}\x00{first_user}".encode(), digest_size=6).hexdigest()
    return f"derived:{digest}"


BANDS = 6
"""Locality-sensitive hashing bands (Leskovec, Rajaraman & Ullman, "Mining of Massive
Datasets", ch. 3.4): rows sharing any band's key are compared."""
_ROWS_PER_BAND = 3
_SEEDS = tuple(
    int.from_bytes(hashlib.blake2b(bytes([i]), digest_size=4).digest(), "big")
    for i in range(BANDS * _ROWS_PER_BAND)
)
NEAR_TEXT_CHARS = 1000
"""Near-duplicates are judged on this many leading characters of (last user message,
reply), which bounds the cost of each comparison."""


def band_keys(text: str) -> tuple[int, ...]:
    """``BANDS`` keys of ``text``: each hashes three min-hashes (Broder 1997; each one the
    least CRC-32 of its lower-cased word pairs under its own XOR mask). Texts whose word
    pairs have Jaccard similarity J share a band with probability 1 - (1 - J^3)^BANDS:
    0.77 at J = 0.6, 0.99 at J = 0.8, 0.05 at J = 0.2."""
    words = _WORD.findall(text.lower())
    if len(words) < 2:
        shingles = [" ".join(words).encode()]
    else:
        shingles = [f"{a} {b}".encode() for a, b in itertools.pairwise(words)]
    shingle_hashes = {zlib.crc32(shingle) for shingle in shingles}
    hashes = [min(map(seed.__xor__, shingle_hashes)) for seed in _SEEDS]
    return tuple(
        zlib.crc32(b"".join(h.to_bytes(4, "big") for h in hashes[band : band + _ROWS_PER_BAND]))
        for band in range(0, len(hashes), _ROWS_PER_BAND)
    )


class CandidateIndex:
    """What stays in memory per candidate: its spill offset, band keys, history length
    and conversation; per conversation its split group, per user a conversation of
    theirs; the exact keys seen."""

    def __init__(self) -> None:
        self.offsets = array("Q")
        self.bands = tuple(array("I") for _ in range(BANDS))
        self.history_lengths = array("I")
        self.conversations = array("I")
        self.conversation_ids: dict[str, int] = {}
        self.user_conversations: dict[str, int] = {}
        self._parents = array("I")
        self.exact_keys: set[int] = set()

    def __len__(self) -> int:
        return len(self.offsets)

    def group(self, conversation: int) -> int:
        """The split group of a conversation: conversations that share a logged user,
        directly or through others, share a group (union-find with path halving)."""
        parents = self._parents
        while parents[conversation] != conversation:
            parents[conversation] = parents[parents[conversation]]
            conversation = parents[conversation]
        return conversation

    def _join(self, left: int, right: int) -> None:
        left, right = self.group(left), self.group(right)
        if left != right:
            self._parents[max(left, right)] = min(left, right)

    def add(self, candidate: Candidate, spill: IO[bytes], dropped: Counter[str]) -> None:
        """Write ``candidate`` to ``spill`` and index it, unless it is an exact duplicate."""
        if candidate.exact_key in self.exact_keys:
            dropped["duplicate"] += 1
            return
        self.exact_keys.add(candidate.exact_key)
        conversation = self.conversation_ids.setdefault(
            candidate.conversation, len(self.conversation_ids)
        )
        if conversation == len(self._parents):
            self._parents.append(conversation)
        if candidate.user is not None:
            other = self.user_conversations.setdefault(candidate.user, conversation)
            self._join(conversation, other)
        self.offsets.append(spill.tell())
        for band, key in zip(self.bands, band_keys(candidate.near_text), strict=True):
            band.append(key)
        self.history_lengths.append(min(candidate.history_length, 2**32 - 1))
        self.conversations.append(conversation)
        spill.write(orjson.dumps([candidate.row, candidate.near_text]) + b"\n")
