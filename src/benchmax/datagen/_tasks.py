"""One request task (a chunk, a question type, its slots' styles) through every stage:
write, check, regenerate once with feedback, check again, rewrite into styles."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from benchmax.datagen._cache import ChunkCache, ChunkResult, KeptPair, chunk_key
from benchmax.datagen._chunking import Chunk
from benchmax.datagen._errors import DatagenError
from benchmax.datagen._filters import (
    DROP_REASONS,
    build_grounding_prompt,
    local_drop_reason,
    parse_grounding_reply,
)
from benchmax.datagen._prompts import (
    PROMPT_VERSION,
    QAPair,
    ReplyShapeError,
    build_feedback_prompt,
    build_qa_prompt,
    build_retry_prompt,
    parse_qa_reply,
)
from benchmax.datagen._styles import build_style_prompt, parse_style_reply
from benchmax.rewards import Judge, JudgeError

__all__ = ["RequestFailed", "Task", "TaskRunner", "TaskSettings"]

logger = logging.getLogger("benchmax.datagen")

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Task:
    """Ask for ``len(styles)`` pairs of ``question_type`` about ``chunk`` (and ``linked``, the
    related chunk of a multi-hop task); the i-th kept pair is rewritten into ``styles[i]``."""

    chunk: Chunk
    question_type: str
    styles: tuple[str, ...]
    linked: Chunk | None = None

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return (self.chunk,) if self.linked is None else (self.chunk, self.linked)

    @property
    def passages(self) -> list[tuple[str, str]]:
        return [(chunk.document.name, chunk.text) for chunk in self.chunks]


@dataclass(frozen=True, slots=True)
class TaskSettings:
    """The generation settings a task's requests and checks depend on (all in its cache key)."""

    max_answer_words: int
    min_answer_support: float
    trivial_overlap: float | None
    grounding_check: bool
    regenerate: bool
    temperature: float
    max_tokens: int | None


class RequestFailed(DatagenError):
    """A request failed (transport, auth, status): the task is not cached, a re-run asks again."""


@dataclass(slots=True)
class _Checked:
    accepted: list[QAPair]
    rejected: list[tuple[QAPair, str, str]]  # pair, reason code, feedback for the model


class TaskRunner:
    """Runs tasks against the model behind ``judge``, through ``cache``."""

    def __init__(self, judge: Judge, settings: TaskSettings, cache: ChunkCache) -> None:
        self.judge = judge
        self.settings = settings
        self.cache = cache

    def key(self, task: Task) -> str:
        return chunk_key(
            PROMPT_VERSION,
            self.judge.model,
            task.question_type,
            list(task.styles),
            [self.settings.max_answer_words, self.settings.min_answer_support],
            [self.settings.trivial_overlap, self.settings.grounding_check],
            [self.settings.regenerate, self.settings.temperature],
            [[chunk.document.name, chunk.text] for chunk in task.chunks],
        )

    async def _ask(
        self, prompt: str, request_id: str, parse: Callable[[Mapping[str, object]], _T]
    ) -> tuple[_T | None, str]:
        """The parsed reply (asked again once, saying why, when unusable) or ``(None, why)``."""
        reason = ""
        for attempt in range(2):
            try:
                reply, _raw = await self.judge.request_json(
                    prompt,
                    request_id=f"{request_id}-{attempt}",
                    temperature=self.settings.temperature,
                    max_tokens=self.settings.max_tokens,
                )
                return parse(reply), reason
            except ReplyShapeError as error:
                reason = str(error)
            except JudgeError as error:
                if not isinstance(error.__cause__, ValueError):  # transport, auth, status
                    raise RequestFailed(str(error)) from None
                reason = str(error.__cause__)  # not a JSON object, or empty
            logger.warning("generate_qa.reply_refused request=%s: %s", request_id, reason)
            prompt = build_retry_prompt(prompt, reason)
        return None, reason

    async def _check(
        self, task: Task, pairs: Sequence[QAPair], request_id: str, dropped: Counter[str]
    ) -> _Checked:
        settings = self.settings
        texts = [text for _, text in task.passages]
        checked = _Checked([], [])
        passing = []
        for pair in pairs:
            reason = local_drop_reason(
                pair,
                texts,
                question_type=task.question_type,
                max_answer_words=settings.max_answer_words,
                min_answer_support=settings.min_answer_support,
                trivial_overlap=settings.trivial_overlap,
            )
            if reason is None:
                passing.append(pair)
            else:
                feedback = DROP_REASONS[reason].format(max_words=settings.max_answer_words)
                checked.rejected.append((pair, reason, feedback))
        if not passing or not settings.grounding_check:
            checked.accepted = passing
            return checked
        prompt = build_grounding_prompt(task.passages, passing)
        verdicts, _ = await self._ask(
            prompt, request_id, lambda reply: parse_grounding_reply(reply, len(passing))
        )
        if verdicts is None:
            dropped["grounding_unchecked"] += len(passing)
            return checked
        for pair, verdict in zip(passing, verdicts, strict=True):
            if verdict.supported:
                checked.accepted.append(pair)
            else:
                why = DROP_REASONS["ungrounded"]
                feedback = f"{why}: {verdict.reason}" if verdict.reason else why
                checked.rejected.append((pair, "ungrounded", feedback))
        return checked

    async def _styled(
        self, task: Task, pairs: Sequence[QAPair], request_id: str
    ) -> tuple[list[KeptPair], int]:
        """The pairs in their slots' styles, and how many fell back to ``natural`` (an
        unusable rewrite reply, or a rewrite that gives the answer away)."""
        styles = task.styles[: len(pairs)]
        wanted = [
            (index, style) for index, style in enumerate(styles) if style != "natural"
        ]  # fmt: skip
        rewritten: dict[int, str] = {}
        if wanted:
            prompt = build_style_prompt([(style, pairs[index].question) for index, style in wanted])
            questions, _ = await self._ask(
                prompt, request_id, lambda reply: parse_style_reply(reply, len(wanted))
            )
            for (index, _style), question in zip(wanted, questions or [], strict=False):
                if pairs[index].answer.lower() not in question.lower():
                    rewritten[index] = question
        kept = [
            KeptPair(
                question=rewritten.get(index, pair.question),
                answer=pair.answer,
                natural=pair.question,
                style=styles[index] if index in rewritten else "natural",
            )
            for index, pair in enumerate(pairs)
        ]
        return kept, len(wanted) - len(rewritten)

    async def run(self, task: Task) -> ChunkResult:
        """The task's result, from the cache or asked now (and cached); raises
        ``RequestFailed`` when a request fails."""
        key = self.key(task)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        request_id = f"generate-qa-{key[:16]}"
        count = len(task.styles)
        name, _text = task.passages[0]
        prompt = build_qa_prompt(
            task.chunk.text,
            source=name,
            pairs=count,
            max_words=self.settings.max_answer_words,
            question_type=task.question_type,
            linked=task.passages[1] if task.linked is not None else None,
        )
        pairs, reason = await self._ask(prompt, f"{request_id}-write", parse_qa_reply)
        if pairs is None:
            result = ChunkResult(key, "invalid", reason=reason, retried=True)
            self.cache.add(result)
            return result
        dropped: Counter[str] = Counter()
        dropped["over_limit"] += max(len(pairs) - count, 0)
        checked = await self._check(task, pairs[:count], f"{request_id}-ground", dropped)
        accepted, rejected = checked.accepted, checked.rejected
        generated, regenerated = len(pairs), 0
        if rejected and self.settings.regenerate:
            again = build_feedback_prompt(prompt, [(pair, why) for pair, _, why in rejected])
            more, _ = await self._ask(again, f"{request_id}-rewrite", parse_qa_reply)
            if more is not None:
                generated += len(more)
                regenerated = len(rejected)
                dropped["over_limit"] += max(len(more) - len(rejected), 0)
                second = await self._check(
                    task, more[: len(rejected)], f"{request_id}-reground", dropped
                )
                accepted += second.accepted
                rejected = second.rejected
        dropped.update(code for _, code, _ in rejected)
        kept, fallbacks = await self._styled(task, accepted, f"{request_id}-style")
        result = ChunkResult(
            key,
            "ok",
            tuple(kept),
            retried=bool(reason),
            generated=generated,
            regenerated=regenerated,
            dropped={code: n for code, n in dropped.items() if n},
            style_fallbacks=fallbacks,
        )
        self.cache.add(result)
        return result
