"""The base every source environment subclasses: what ``OpenEnvEnv``,
``ReasoningGymEnv`` and ``VerifiersEnv`` would otherwise each write again.

:class:`SourceEnv` names the source in its argument messages, keeps process-bound
state (connections, locks, loaded peer objects) out of pickles and rebuilds it where
the environment is unpickled, reads an example's source record from its payload and
writes the prompt's system and user messages. :class:`SeededSourceEnv` adds the seeded
train/eval splits of the sources that generate their examples from a seed.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from benchmax._value_checks import is_int_at_least
from benchmax.envs import BaseEnv, Dataset, DatasetSplit, Example, JsonRow
from benchmax.sources._arguments import checked_count

__all__ = ["EVAL_SEED_OFFSET", "SeededSourceEnv", "SourceEnv"]

EVAL_SEED_OFFSET = 1_000_000_000
"""Added to ``seed`` for the eval split; split sizes are capped below it so the splits'
seeds (``seed + i``) never meet."""


class SourceEnv(BaseEnv):
    """A ``BaseEnv`` adapting one peer package.

    Subclasses set ``source_name`` (the public class name its messages give),
    ``payload_key`` (the payload field holding an example's source record) and
    ``process_local`` (attributes bound to the process: left out of a pickle and made
    again by :meth:`_start_process_state` when it is loaded).
    """

    source_name: ClassVar[str]
    payload_key: ClassVar[str]
    process_local: ClassVar[tuple[str, ...]] = ()

    def __getstate__(self) -> dict[str, object]:
        state = dict(vars(self))
        for name in self.process_local:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self._start_process_state()

    def _start_process_state(self) -> None:
        """Make the ``process_local`` attributes afresh (at construction and unpickling)."""

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        """The split's examples as the source makes them, in a worker thread (a peer may
        generate or load them at length); ``base_dir`` is not read."""
        return Dataset(await asyncio.to_thread(self._examples, split, max_examples))

    @abstractmethod
    def _examples(self, split: DatasetSplit, max_examples: int | None) -> list[Example[JsonRow]]:
        """The split's examples, at most ``max_examples`` of them."""

    def _checked_text(self, name: str, value: object) -> str | None:
        """``value`` when it is a string or ``None``; ``TypeError`` otherwise."""
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{self.source_name} {name} must be a string or None")
        return value

    def _source_record(self, row: Mapping[str, object]) -> Mapping[str, object] | None:
        """The example's source record (``row[payload_key]``), or ``None`` when ``row``
        has none that is an object."""
        record = row.get(self.payload_key)
        return record if isinstance(record, Mapping) else None

    @staticmethod
    def _prompt(system_prompt: str | None, user_text: str) -> list[dict[str, object]]:
        """The prompt's messages: ``system_prompt`` (when not empty), then ``user_text``."""
        messages: list[dict[str, object]] = [{"role": "user", "content": user_text}]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        return messages


class SeededSourceEnv(SourceEnv):
    """A source whose splits are generated from ``seed``: the train split from ``seed``,
    the eval split from ``seed + EVAL_SEED_OFFSET``, each with its own size."""

    seed: int
    _split_sizes: dict[DatasetSplit, int]

    def _set_seeded_splits(
        self, size: object, eval_size: object, seed: object, *, names: tuple[str, str]
    ) -> tuple[int, int]:
        """Check and keep the train and eval sizes (arguments ``names``; an eval size of
        ``None`` is the train one) and ``seed``; the two sizes."""
        train = checked_count(self.source_name, names[0], size, below=EVAL_SEED_OFFSET)
        evaluation = (
            train
            if eval_size is None
            else checked_count(self.source_name, names[1], eval_size, below=EVAL_SEED_OFFSET)
        )
        if not is_int_at_least(seed, 0):
            raise ValueError(
                f"{self.source_name} seed must be a non-negative integer, not {seed!r}"
            )
        self.seed = seed
        self._split_sizes = {"train": train, "eval": evaluation}
        return train, evaluation

    def split_seed(self, split: DatasetSplit) -> int:
        """The seed of the split's first example: ``seed`` or ``seed + EVAL_SEED_OFFSET``."""
        return self.seed if split == "train" else self.seed + EVAL_SEED_OFFSET

    def _split_count(self, split: DatasetSplit, max_examples: int | None) -> tuple[int, int]:
        """The split's size and how many of its examples a dataset takes."""
        size = self._split_sizes[split]
        return size, size if max_examples is None else min(size, max_examples)
