"""``run_pool``: at most N groups at once, stopping at the first failure."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

__all__ = ["run_pool"]


async def run_pool[T](
    items: Iterable[T],
    work: Callable[[T], Awaitable[None]],
    *,
    concurrency: int,
    on_error: Callable[[T, Exception], BaseException] | None = None,
) -> None:
    """Await ``work(item)`` for every item, at most ``concurrency`` at once, started in
    item order.

    The first ``Exception`` stops new items from starting; the items in flight finish
    (their own errors after the first are dropped), then the first error is raised, as
    ``on_error(item, error)`` makes it when given. Cancellation propagates at once.
    Raises ``ValueError`` for a ``concurrency`` below 1.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    pending = iter(items)
    errors: list[BaseException] = []

    async def worker() -> None:
        for item in pending:
            if errors:
                return
            try:
                await work(item)
            except Exception as error:
                errors.append(error if on_error is None else on_error(item, error))
                return

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if errors:
        raise errors[0]
