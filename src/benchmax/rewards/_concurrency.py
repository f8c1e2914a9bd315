"""Concurrent judge evaluations that stop their siblings when one fails."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable

from benchmax.rewards.judge import Judge
from benchmax.rewards.rubric import Rubric, RubricEvaluation, evaluate_single_rubric


async def gather_or_cancel[T](awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` in creation order; on the first failure cancel the rest and re-raise.

    Requests start in the order the awaitables are given, so scripted judges
    see them in the documented order.
    """
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        raise


async def evaluate_concurrently(
    pairs: Iterable[tuple[Rubric, str]],
    *,
    question: str,
    ground_truth: str | None,
    judge: Judge,
    read_trajectory: bool = False,
) -> list[RubricEvaluation]:
    """Evaluate every ``(rubric, response)`` pair at once (unlogged), requests in pair order
    (``read_trajectory``: the responses are rendered transcripts)."""
    return await gather_or_cancel(
        evaluate_single_rubric(
            rubric,
            question=question,
            response=response,
            ground_truth=ground_truth,
            judge=judge,
            log_result=False,
            read_trajectory=read_trajectory,
        )
        for rubric, response in pairs
    )
