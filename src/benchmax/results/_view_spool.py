"""One pass over a results file for the ``view`` page, its groups kept on disk, not in memory.

Each complete group becomes its page entry (``group_entry``) the moment its last line is
read, and the entry is pickled to a spool file beside the page; memory holds the groups
still missing lines and three numbers per group (example index, attempt, spool offset).
Entries carry their transcripts while the spooled transcripts stay within the budget
(``TRANSCRIPT_BUDGET`` bytes, in file order): the first group that does not fit and every
group after it are spooled without (``"x": true``), so the page stays a size a browser
opens, whatever the file's size. After the pass, ``entries`` reads the groups
``read_results`` keeps (per example the complete group of the highest attempt) in example
order, as often as the page needs them.
"""

from __future__ import annotations

import pickle
import tempfile
from array import array
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, cast

from benchmax.results._page_data import GroupEntry, group_entry, reward_weights_of
from benchmax.results._reading import GroupScan
from benchmax.results._records import ResultsHeader
from benchmax.trajectory import Trajectory

__all__ = ["TRANSCRIPT_BUDGET", "SpooledGroups"]

TRANSCRIPT_BUDGET = 64 * 2**20
"""Bytes of transcripts (as spooled: about what they add to the page) the ``view`` page
embeds; groups read after the budget is spent show rewards, reasons, timings and usage,
and name the ``benchmax show`` command that prints them."""


def _pickled(entry: GroupEntry) -> bytes:
    """``entry`` pickled (``RecursionError`` for a value nested near the recursion limit)."""
    return pickle.dumps(entry, pickle.HIGHEST_PROTOCOL)


class SpooledGroups:
    """The complete groups of a results file, read once (``ResultsFileError`` naming
    ``file:line`` for a damaged line) and spooled to a temporary file in ``directory``.

    A context manager: the spool is deleted on exit."""

    def __init__(
        self,
        path: Path,
        directory: Path,
        *,
        tokens: bool = False,
        budget: int = TRANSCRIPT_BUDGET,
    ) -> None:
        scan = GroupScan(path, build=True)
        self.header: ResultsHeader = scan.header
        self.budget = budget
        weights = reward_weights_of(scan.header)
        directory.mkdir(parents=True, exist_ok=True)
        self._spool = cast(BinaryIO, tempfile.TemporaryFile(dir=directory))
        try:
            offsets = array("q")
            spent, embedding = 0, budget > 0
            for _key, records in scan:
                group = cast(list[Trajectory], records)
                data = b""
                if embedding:
                    try:
                        data = _pickled(group_entry(group, weights=weights, tokens=tokens))
                    except RecursionError:  # a transcript nested too deep to embed
                        data = b""
                    else:
                        spent += len(data)
                        embedding = spent <= budget
                if not data or not embedding:
                    entry = group_entry(group, weights=weights, transcripts=False)
                    data = _pickled(entry)
                offsets.append(self._spool.tell())
                self._spool.write(data)
            self._offsets = array("q", (offsets[n] for n in scan.chosen()))
        except BaseException:
            self._spool.close()
            raise

    def __len__(self) -> int:
        """How many groups the page shows."""
        return len(self._offsets)

    def entries(self) -> Iterator[GroupEntry]:
        """The entries of the groups ``read_results`` keeps, in example order."""
        for offset in self._offsets:
            self._spool.seek(offset)
            yield cast(GroupEntry, pickle.load(self._spool))

    def close(self) -> None:
        self._spool.close()

    def __enter__(self) -> SpooledGroups:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
