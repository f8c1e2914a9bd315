"""The fixed, ordered dataset base class."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from benchmax.envs.shared_types import Example

__all__ = ["Dataset"]


class Dataset[Payload]:
    """A fixed, ordered collection of examples, snapshotted at construction."""

    def __init__(self, examples: Iterable[Example[Payload]]) -> None:
        self._examples: tuple[Example[Payload], ...] = tuple(examples)

    def __len__(self) -> int:
        return len(self._examples)

    def __getitem__(self, index: int) -> Example[Payload]:
        return self._examples[index]

    def __iter__(self) -> Iterator[Example[Payload]]:
        return iter(self._examples)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<{len(self._examples)} examples>)"
