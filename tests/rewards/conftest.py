"""Fixtures for the rewards tests: a scripted stand-in for the OpenAI SDK client.

``stub_judge`` replaces ``benchmax.rewards.judge.AsyncOpenAI`` (the documented
seam) with a factory whose clients answer from a script. End-to-end tests use
the real SDK against ``benchmax.testing.MockModelServer`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.rewards import Judge

type Reply = str | BaseException | Callable[[dict[str, Any]], str | BaseException | None] | None


def completion(content: str | None) -> SimpleNamespace:
    """A minimal chat-completion response object with one choice."""
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=content))])


class StubClient:
    """What the patched ``AsyncOpenAI`` returns: ``chat.completions.create`` and ``close``."""

    def __init__(self, backend: StubJudge, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.backend = backend
        self.args = args
        self.kwargs = kwargs
        self.close_calls = 0
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    async def _create(self, *args: Any, **request: Any) -> Any:
        assert not args, "create must be called with keyword arguments only"
        self.backend.requests.append(request)
        reply = self.backend.next_reply(request)
        if isinstance(reply, BaseException):
            raise reply
        return completion(reply)

    async def close(self) -> None:
        self.close_calls += 1


@dataclass
class StubJudge:
    """Scripted judge replies in call order; a callable reply answers every call."""

    replies: list[Reply] = field(default_factory=list)
    default: Reply = None
    clients: list[StubClient] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def factory(self, *args: Any, **kwargs: Any) -> StubClient:
        client = StubClient(self, args, kwargs)
        self.clients.append(client)
        return client

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def script_scores(self, *scores: object) -> None:
        """Queue ``{"score": s, "reasoning": ...}`` answers, one per score."""
        self.replies.extend(json.dumps({"score": s, "reasoning": f"r{s}"}) for s in scores)

    def next_reply(self, request: dict[str, Any]) -> str | BaseException | None:
        reply = self.replies.pop(0) if self.replies else self.default
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(request)
        return reply

    @property
    def prompts(self) -> list[str]:
        return [request["messages"][0]["content"] for request in self.requests]


@pytest.fixture
def stub_judge(monkeypatch: pytest.MonkeyPatch) -> StubJudge:
    """Patch the judge's ``AsyncOpenAI`` seam with a scripted stand-in."""
    stub = StubJudge()
    monkeypatch.setattr("benchmax.rewards.judge.AsyncOpenAI", stub.factory)
    return stub


@pytest.fixture
def judge() -> Judge:
    """A judge configuration pointing nowhere (use with ``stub_judge``)."""
    return Judge(
        model="judge-model", base_url="http://judge.invalid/v1", auth=StaticBearerAuth("s")
    )


@pytest.fixture
def judge_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record the keyword arguments of every ``Judge.request_json`` call (then run it)."""
    calls: list[dict[str, Any]] = []
    original = Judge.request_json

    async def recording(self: Judge, prompt: str, **kwargs: Any) -> tuple[dict[str, Any], str]:
        calls.append(kwargs)
        return await original(self, prompt, **kwargs)

    monkeypatch.setattr(Judge, "request_json", recording)
    return calls
