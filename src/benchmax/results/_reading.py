"""Reading a results file: a JSONL header defining the run, then one line per rollout.

``read_results`` returns the complete groups in example order; ``iter_results`` and
``GroupScan`` stream them as they complete, so memory holds the groups still missing lines
plus what a reader keeps. Every line is checked (``ResultsFileError`` naming ``file:line``);
strings come back as they were written (``encoded_line`` writes text UTF-8 cannot encode
as JSON escapes). ``ResultsStore`` (``_store``) writes the file.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import benchmax
from benchmax.results._errors import ResultsFileError
from benchmax.results._records import ResultsHeader
from benchmax.results._rollout_lines import (
    SUMMARY_FIELDS,
    LazyRollout,
    checked_record,
    summary_group,
)
from benchmax.trajectory import Trajectory

__all__ = [
    "RESULTS_FORMAT",
    "GroupScan",
    "Results",
    "checked_header",
    "iter_lazy_groups",
    "iter_results",
    "read_results",
    "read_results_summary",
    "read_trajectories",
]

RESULTS_FORMAT = "benchmax.results/1"


@dataclass(frozen=True, slots=True)
class Results:
    """A results file as a reader sees it: the header and the rollouts of complete groups,
    each a ``benchmax.trajectory.Trajectory``, in example then group order."""

    header: ResultsHeader
    rollouts: tuple[Trajectory, ...]

    @property
    def definition(self) -> Mapping[str, Any]:
        return self.header["definition"]


def checked_header(path: Path, line: bytes) -> ResultsHeader:
    """The header line, or ``ResultsFileError`` saying why it is not one this version reads."""
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        header = None
    if isinstance(header, dict) and "example_index" in header and header.get("type") != "header":
        raise ResultsFileError(
            f"{path}:1 is a rollout record, not the results header: a results file starts "
            "with its header line"
        )
    if not isinstance(header, dict) or header.get("type") != "header":
        raise ResultsFileError(f"{path} is not a benchmax results file (no results header)")
    found = header.get("format")
    if found != RESULTS_FORMAT:
        if not (isinstance(found, str) and found.startswith("benchmax.results/")):
            raise ResultsFileError(f"{path} is not a benchmax results file (no results format)")
        raise ResultsFileError(
            f"{path} is in results format {found}, which benchmax {benchmax.__version__} "
            f"cannot read (it reads {RESULTS_FORMAT}); use the benchmax version that wrote it, "
            "or write a new results file"
        )
    if not isinstance(header.get("definition"), dict):
        raise ResultsFileError(f"{path} has a damaged results header (no run definition)")
    return cast(ResultsHeader, header)


def read_results(path: str | Path) -> Results:
    """Read a results file: its header and the rollouts of complete groups, in example order.

    Partial groups (superseded by a later attempt, or lost to an interruption) are left out.
    The whole file is held in memory; ``iter_results`` streams it instead.
    """
    scan = GroupScan(path, build=True)
    groups = [group for _key, group in scan]
    rollouts = tuple(r for n in scan.chosen() for r in groups[n])
    return Results(header=scan.header, rollouts=cast(tuple[Trajectory, ...], rollouts))


class GroupScan:
    """One pass over a results file that yields each complete group as soon as its last line
    is read, as ``((example_index, attempt), records)`` with the records in group order:
    ``Trajectory`` records when ``build``, dicts of the summary fields (plus
    ``example_index`` and ``attempt``) when false, ``LazyRollout`` when
    ``None``.

    A group that gets another line after it completed is, as ``read_results`` sees it, not
    complete: ``overfull`` collects such keys during the pass, and ``chosen`` leaves them
    out. So a reader can reduce each group to what it keeps the moment it completes
    (memory: the groups still missing lines, 16 bytes per group yielded, plus the
    reductions). Raises ``ResultsFileError`` as ``iter_results`` does (the header's at
    construction)."""

    def __init__(self, path: str | Path, *, build: bool | None) -> None:
        self.path = Path(path)
        self.overfull: set[tuple[int, int]] = set()
        self.header, self._groups = _stream(self.path, build=build, overfull=self.overfull)
        self._indexes = _Integers()
        self._attempts = _Integers()

    def __iter__(self) -> Iterator[tuple[tuple[int, int], list[Any]]]:
        for group in self._groups:
            index, attempt = _key_of(group[0])
            self._indexes.append(index)
            self._attempts.append(attempt)
            yield (index, attempt), group

    def chosen(self) -> list[int]:
        """The positions (0-based, in the order the pass yielded them) of the groups
        ``read_results`` keeps, in example order: per example index, its complete group of
        the highest attempt that is not overfull. Call after the pass."""
        indexes, attempts = self._indexes, self._attempts
        order = sorted(range(len(indexes)), key=lambda n: (indexes[n], -attempts[n]))
        kept: list[int] = []
        last: int | None = None
        for n in order:
            if indexes[n] == last or (indexes[n], attempts[n]) in self.overfull:
                continue
            kept.append(n)
            last = indexes[n]
        return kept


class _Integers:
    """Integers appended in order: 8 bytes each in an ``array`` while they fit in 64 bits,
    a list once one does not (a JSON integer has no bound)."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: array[int] | list[int] = array("q")

    def append(self, value: int) -> None:
        try:
            self._items.append(value)
        except OverflowError:
            self._items = [*self._items, value]

    def __getitem__(self, position: int) -> int:
        return self._items[position]

    def __len__(self) -> int:
        return len(self._items)


def _key_of(record: Trajectory | LazyRollout | Mapping[str, Any]) -> tuple[int, int]:
    if isinstance(record, Trajectory):
        return record.example_index or 0, record.attempt
    fields = record.fields if isinstance(record, LazyRollout) else record
    return int(fields["example_index"]), int(fields["attempt"])


def iter_results(path: str | Path) -> Iterator[ResultsHeader | Trajectory]:
    """Stream a results file: first its header (a ``ResultsHeader``), then the rollouts of
    its complete groups as ``Trajectory`` records, each group whole and in group order,
    groups in the order they complete in the file.

    Memory holds one line at a time plus the groups still missing lines. Unlike
    ``read_results`` nothing is sorted: groups come in file (completion) order, and a
    group run again under a later attempt (its example id changed on a resume) is yielded
    as well as the one it supersedes. A torn last line is skipped. Raises
    ``ResultsFileError`` (naming ``file:line``) when the file cannot be read, has no valid
    header, or a line is not a rollout record; errors in later lines are raised when the
    stream reaches them.
    """
    header, groups = _stream(Path(path), build=True)
    yield header
    for group in groups:
        yield from cast(list[Trajectory], group)


def read_results_summary(path: str | Path) -> Results:
    """``read_results`` without transcripts: each rollout keeps its identity, termination
    reason, rewards and usage only (messages, calls, timings and logs left out), read as a
    stream, so memory holds the rewards of the file, not its text. Raises
    ``ResultsFileError`` as ``read_results`` does."""
    scan = GroupScan(path, build=False)
    kept = [
        summary_group(scan.path, group, index, attempt).trajectories
        for (index, attempt), group in scan
    ]
    return Results(header=scan.header, rollouts=tuple(r for n in scan.chosen() for r in kept[n]))


def iter_lazy_groups(path: str | Path) -> tuple[ResultsHeader, Iterator[list[LazyRollout]]]:
    """The header and each complete group as ``LazyRollout`` lines, in file order: for
    scanning a large file for the few rollouts to show. Errors as ``iter_results``."""
    header, groups = _stream(Path(path), build=None)
    return header, cast(Iterator[list[LazyRollout]], groups)


def _stream(
    path: Path, *, build: bool | None, overfull: set[tuple[int, int]] | None = None
) -> tuple[ResultsHeader, Iterator[list[Trajectory] | list[dict[str, Any]] | list[LazyRollout]]]:
    """The checked header and the stream of complete groups (``_complete_groups``)."""
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        raise ResultsFileError(f"{path} has no complete header line")
    header = checked_header(path, first[1])
    size = header["definition"].get("group_size")
    return header, _complete_groups(path, lines, size, build=build, overfull=overfull)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for each complete (newline-ended) line of ``path``."""
    try:
        handle = open(path, "rb")  # closed when the generator ends
    except OSError as error:
        raise ResultsFileError(f"cannot read {path}: {error.strerror or error}") from None
    with handle:
        try:
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    return  # a torn last line
                yield number, raw
        except OSError as error:
            raise ResultsFileError(f"cannot read {path}: {error.strerror or error}") from None


def _complete_groups(
    path: Path,
    lines: Iterator[tuple[int, bytes]],
    size: object,
    *,
    build: bool | None,
    overfull: set[tuple[int, int]] | None,
) -> Iterator[list[Trajectory] | list[dict[str, Any]] | list[LazyRollout]]:
    """Each complete group's records in group order, as soon as its last line is read:
    ``Trajectory`` records when ``build``, dicts of the summary fields when false,
    ``LazyRollout`` when ``None``.

    With ``overfull`` (``GroupScan``), a line of a group that already completed adds the
    group's ``(example_index, attempt)`` to it (the group has a line too many); without,
    such lines are taken as the start of another group of the same attempt."""
    pending: dict[tuple[int, int], list[Any]] = {}
    completed: dict[int, set[int]] = {}  # per attempt, the example indexes (compact)
    for number, raw in lines:
        if not raw.strip():
            continue
        record = checked_record(path, number, raw)
        key = (int(record["example_index"]), int(record["attempt"]))
        if overfull is not None and key[0] in completed.get(key[1], ()):
            overfull.add(key)
            continue
        item: Any
        if build is None:
            item = LazyRollout(path, number, raw, record)
        elif build:
            item = _trajectory(path, number, record)
        else:
            _trajectory(path, number, record)  # the line is checked as ``build`` checks it
            item = {name: record[name] for name in SUMMARY_FIELDS if name in record}
            item["example_index"], item["attempt"] = key
        records = pending.setdefault(key, [])
        records.append((record["group_index"], record["example_id"], item))
        if _complete(records, size):
            del pending[key]
            if overfull is not None:
                completed.setdefault(key[1], set()).add(key[0])
            yield [r[2] for r in sorted(records, key=lambda r: r[0])]


def _trajectory(path: Path, number: int, record: dict[str, Any]) -> Trajectory:
    """Line ``number``'s record as a ``Trajectory``; raises ``ResultsFileError`` naming
    ``file:line`` for a record that is not one (its ``model_calls`` included)."""
    try:
        return Trajectory.from_json(record)
    except (TypeError, ValueError) as error:
        raise ResultsFileError(f"{path}:{number} is not a rollout record: {error}") from None


def _complete(records: Sequence[tuple[Any, Any, Any]], size: object) -> bool:
    """Whether ``(group_index, example_id, _)`` entries make a whole group of ``size``."""
    return (
        isinstance(size, int)
        and len(records) == size
        and {r[0] for r in records} == set(range(size))
        and len({r[1] for r in records}) == 1
    )


def read_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """The trajectories of a results file's complete groups, with everything recorded
    (token ids and logprobs included), for building samples offline.

    The file is streamed (memory holds one group, whatever its size): groups come in the
    order they were written, each in group order. Raises ``ResultsFileError`` for a file
    that is not a readable results file, or (when the stream reaches it) a damaged line.
    """
    stream = iter_results(path)
    next(stream)  # the header
    for record in stream:
        yield cast(Trajectory, record)
