"""``AsyncService``: something that serves on the running event loop between ``start()`` and
``stop()``, and as ``async with service:`` (started on entry, stopped on exit, also on error).
The capture endpoint and the mock model server are two."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["AsyncService"]


class AsyncService(ABC):
    """Started by ``start()`` (returns the service), stopped by ``stop()``; usable as an
    async context manager that does both."""

    __slots__ = ()

    @abstractmethod
    async def start(self) -> Self:
        """Start serving; the service itself."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop serving and release what ``start`` took."""

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
