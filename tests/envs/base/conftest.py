"""Fixtures for BaseEnv tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmax._modelhttp import retries


@pytest.fixture
def backoff_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Record retry waits instead of sleeping through them."""
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(retries, "backoff_sleep", no_sleep)
    yield waits
