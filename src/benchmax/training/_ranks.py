"""The data-parallel processes of one ``benchmax train`` run, as each of them sees it.

A run in ``N`` processes (``benchmax train --num-processes N``, ``accelerate launch`` or
``torchrun``: the launcher sets ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK``) joins one
process group through accelerate (NCCL on GPUs, gloo on CPU) before anything else. Each
rank runs whole groups; rank 0 owns the run directory, the others hand it what they
collected (:meth:`Ranks.gather`) and agree with it on when to stop (:meth:`Ranks.any`).
A single process (no ``WORLD_SIZE`` above 1) joins nothing and every method is trivial.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from benchmax.training._errors import TrainingError

__all__ = ["COLLECTIVE_TIMEOUT", "Ranks", "join_ranks", "launched_world_size"]

COLLECTIVE_TIMEOUT = timedelta(hours=3)
"""How long a rank waits for the others at one collective: rank 0 evaluates alone while
the others wait for it at the next step's first one."""


def launched_world_size() -> int:
    """The process count a launcher set (``WORLD_SIZE``); 1 without a launcher.
    Raises :class:`TrainingError` for a value that is not a positive integer."""
    value = os.environ.get("WORLD_SIZE", "").strip() or "1"
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise TrainingError(f"WORLD_SIZE must be a positive integer, got {value!r}")
    return size


@dataclass(frozen=True, slots=True)
class Ranks:
    """This process's place among the run's ``count`` processes (``index`` 0 is the main
    one, which writes the run directory)."""

    index: int
    count: int
    sharded: bool = False
    """Whether accelerate was launched with DeepSpeed or FSDP (the model is wrapped or
    sharded, so this process cannot sample it on its own)."""

    @property
    def main(self) -> bool:
        return self.index == 0

    def barrier(self) -> None:
        """Wait until every rank got here."""
        if self.count > 1:
            import torch.distributed as dist

            dist.barrier()

    def gather[T](self, value: T) -> list[T]:
        """Every rank's ``value`` (pickled), by rank, on every rank."""
        if self.count == 1:
            return [value]
        import torch.distributed as dist

        gathered: list[object] = [None] * self.count
        dist.all_gather_object(gathered, value)
        return cast("list[T]", gathered)

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank (every rank gets the same answer)."""
        return any(self.gather(bool(flag)))


def join_ranks() -> Ranks:
    """Join the launcher's process group (``WORLD_SIZE`` above 1) or stand alone;
    ``sharded`` when accelerate's launcher set DeepSpeed or FSDP (one process too).

    The group is created by accelerate's ``PartialState`` with the device the run uses
    (gloo when torch sees no GPU) and :data:`COLLECTIVE_TIMEOUT`; the trainer reuses it.
    """
    count = launched_world_size()
    sharded = any(
        os.environ.get(name, "").lower() == "true"
        for name in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")
    )
    if count == 1:
        return Ranks(index=0, count=1, sharded=sharded)
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available(), timeout=COLLECTIVE_TIMEOUT)
    if state.num_processes != count:
        raise TrainingError(
            f"WORLD_SIZE is {count} but the process group has {state.num_processes} processes"
        )
    return Ranks(index=state.process_index, count=count, sharded=sharded)
