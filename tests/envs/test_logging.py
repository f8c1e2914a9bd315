"""Tests for the log-attribution context variables of ``benchmax.envs.logging``."""

from __future__ import annotations

import asyncio
import contextvars
import logging

import pytest

from benchmax.envs import logging as envs_logging
from benchmax.envs.logging import (
    _CURRENT_GROUP_RIDS,
    _CURRENT_ROLLOUT_ID,
    group_context,
    rollout_context,
)


def test_module_surface_and_variable_names() -> None:
    assert envs_logging.__all__ == [
        "rollout_context",
        "group_context",
        "_CURRENT_ROLLOUT_ID",
        "_CURRENT_GROUP_RIDS",
    ]
    assert _CURRENT_ROLLOUT_ID.name == "benchmax_capture_rollout_id"
    assert _CURRENT_GROUP_RIDS.name == "benchmax_capture_group_rids"
    assert _CURRENT_ROLLOUT_ID.get() is None
    assert _CURRENT_GROUP_RIDS.get() is None


def test_standard_logging_is_not_shadowed() -> None:
    # The submodule is named ``logging``; package code must still see the stdlib.
    assert logging.getLogger is not None
    assert envs_logging.__name__ == "benchmax.envs.logging"
    assert not hasattr(envs_logging, "getLogger")


def test_rollout_context_sets_and_restores() -> None:
    manager = rollout_context("r-1")
    assert _CURRENT_ROLLOUT_ID.get() is None  # nothing happens until entered
    with manager as bound:
        assert bound is None
        assert _CURRENT_ROLLOUT_ID.get() == "r-1"
        with rollout_context("r-2"):
            assert _CURRENT_ROLLOUT_ID.get() == "r-2"
        assert _CURRENT_ROLLOUT_ID.get() == "r-1"
    assert _CURRENT_ROLLOUT_ID.get() is None


def test_rollout_context_stringifies_at_creation() -> None:
    with rollout_context(42):  # type: ignore[arg-type]
        assert _CURRENT_ROLLOUT_ID.get() == "42"


def test_group_context_consumes_iterable_into_str_tuple() -> None:
    ids = ["a", "b"]
    manager = group_context(iter([*ids, 3]))  # type: ignore[list-item]
    ids.append("late")
    with manager as bound:
        assert bound is None
        assert _CURRENT_GROUP_RIDS.get() == ("a", "b", "3")
    assert _CURRENT_GROUP_RIDS.get() is None


def test_exceptions_are_not_suppressed_and_value_restored() -> None:
    with pytest.raises(KeyError):
        with rollout_context("r"):
            raise KeyError("boom")
    assert _CURRENT_ROLLOUT_ID.get() is None
    with pytest.raises(RuntimeError):
        with group_context(["r"]):
            raise RuntimeError("boom")
    assert _CURRENT_GROUP_RIDS.get() is None


def test_exit_in_another_context_falls_back_to_none() -> None:
    manager = rollout_context("r")
    manager.__enter__()
    outer = _CURRENT_ROLLOUT_ID.set("outer")
    try:
        ctx = contextvars.copy_context()
        assert ctx.run(manager.__exit__, None, None, None) is None  # token from another context
        assert ctx[_CURRENT_ROLLOUT_ID] is None
    finally:
        _CURRENT_ROLLOUT_ID.reset(outer)
        manager.__exit__(None, None, None)  # token already spent: falls back to None
    assert _CURRENT_ROLLOUT_ID.get() is None


async def test_context_is_per_task() -> None:
    seen: dict[str, str | None] = {}
    gate = asyncio.Barrier(2)

    async def run(rollout_id: str) -> None:
        with rollout_context(rollout_id):
            await gate.wait()
            seen[rollout_id] = _CURRENT_ROLLOUT_ID.get()

    await asyncio.gather(run("a"), run("b"))
    assert seen == {"a": "a", "b": "b"}
    assert _CURRENT_ROLLOUT_ID.get() is None
