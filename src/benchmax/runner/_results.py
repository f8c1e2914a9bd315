"""The results file: a JSONL header defining the run, then one line per rollout.

Every completed group is appended with a single write and flushed, so an interrupted run
loses at most the groups in flight. Reopening a file resumes it: complete groups are kept,
groups with missing lines are run again under a new attempt number, and a torn last line
left by a hard kill is cut off.

Writing never fails on what a model, a tool or an environment put in a record: text that
UTF-8 cannot encode (lone surrogates) is written as JSON ``\\uXXXX`` escapes, values JSON
cannot represent are written as their text, and ``read_results`` returns the same strings.
A group write that fails (disk full) is cut back, so the file still ends at the last
complete group, and raises ``ResultsWriteError``. Known secrets are masked in every record.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

import benchmax
from benchmax._file_replace import replace_file
from benchmax.runner._config import mask_secrets
from benchmax.runner._errors import ResultsFileError, ResultsWriteError, ResumeMismatchError
from benchmax.runner._records import ResultsHeader, RolloutRecord
from benchmax.trajectory import Trajectory

__all__ = [
    "RESULTS_FORMAT",
    "CompletedGroup",
    "GroupScan",
    "Results",
    "ResultsStore",
    "completed_group",
    "definition_differences",
    "encoded_line",
    "LazyRollout",
    "iter_group_summaries",
    "iter_lazy_groups",
    "iter_results",
    "new_run_id",
    "read_results",
    "read_results_summary",
    "results_header",
]

try:
    import fcntl
except ImportError:  # Windows: no advisory lock, one run per file is up to the user
    fcntl = None  # type: ignore[assignment]  # the module or None, by platform

RESULTS_FORMAT = "benchmax.results/1"


def new_run_id() -> str:
    """A Harbor-safe run id: UTC timestamp plus random hex, e.g. ``20260101T120000-3f9a2c``."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.urandom(3).hex()}"


def _normalized(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


_ADDED_LATER = frozenset({"env_source", "limits"})
"""Definition keys that headers written before they existed lack: not compared then."""


def definition_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two run definitions (``[]`` when equal).

    A change of the environment's source names the modules that changed. Keys that older
    headers lack (``env_source``, ``limits``) are compared only when recorded, and an
    empty ``constructor_args`` equals none.
    """
    recorded, current = _comparable(recorded), _comparable(current)
    differences = []
    for key in dict.fromkeys([*current, *recorded]):
        if key in _ADDED_LATER and key not in recorded:
            continue
        old, new = _normalized(recorded.get(key)), _normalized(current.get(key))
        if old == new:
            continue
        if key == "env_source" and isinstance(old, dict) and isinstance(new, dict):
            differences.append(_source_difference(old, new))
        else:
            differences.append(f"{key} was {_short(old)}, now {_short(new)}")
    return differences


def _only_extends(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``current`` differs from ``recorded`` only by running more examples: a
    larger ``max_examples``, or none (all). The first groups stay the same examples (the
    split's first ``max_examples``; a group whose example id at its index changed is run
    again all the same), so such a run is resumed without ``force``."""
    old, new = recorded.get("max_examples"), current.get("max_examples")
    if not isinstance(old, int) or isinstance(old, bool):
        return False
    if new is not None and (not isinstance(new, int) or isinstance(new, bool) or new <= old):
        return False
    unbounded = {"max_examples": None}
    return not definition_differences({**recorded, **unbounded}, {**current, **unbounded})


def _comparable(definition: Mapping[str, Any]) -> dict[str, Any]:
    comparable = dict(definition)
    env = comparable.get("env")
    if isinstance(env, Mapping) and env.get("constructor_args") == {}:
        comparable["env"] = {k: v for k, v in env.items() if k != "constructor_args"}
    return comparable


def _source_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    changes = [
        f"{name} ({'new' if name not in old else 'gone' if name not in new else 'edited'})"
        for name in sorted({*old, *new})
        if old.get(name) != new.get(name)
    ]
    return f"the environment's source changed: {', '.join(changes)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass(frozen=True, slots=True)
class CompletedGroup:
    """The parts of one complete group the summary needs."""

    example_index: int
    example_id: str
    termination_reasons: tuple[str, ...]
    rewards: tuple[Mapping[str, float], ...]
    usage: tuple[Mapping[str, object] | None, ...] | None = None
    """Each rollout's token usage as its line holds it (values unchecked: lines come
    from files); ``None`` for lines written before usage was recorded."""


def completed_group(example_index: int, trajectories: Sequence[Trajectory]) -> CompletedGroup:
    """The summary of one complete group, from its records in group order."""
    return CompletedGroup(
        example_index=example_index,
        example_id=trajectories[0].example_id,
        termination_reasons=tuple(t.termination_reason for t in trajectories),
        rewards=tuple(dict(t.rewards) for t in trajectories),
        usage=tuple(None if t.usage is None else dict(t.usage) for t in trajectories),
    )


@dataclass(frozen=True, slots=True)
class Results:
    """A results file as a reader sees it: the header and the rollouts of complete groups,
    each a ``benchmax.trajectory.Trajectory``, in example then group order."""

    header: ResultsHeader
    rollouts: tuple[Trajectory, ...]

    @property
    def definition(self) -> Mapping[str, Any]:
        return self.header["definition"]


@dataclass(slots=True)
class _Scan:
    header: ResultsHeader
    valid_length: int
    groups: dict[int, CompletedGroup] = field(default_factory=dict)
    complete_records: dict[int, list[Trajectory]] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)


def _scan(path: Path, group_size: int | None, *, keep_records: bool) -> _Scan:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ResultsFileError(f"cannot read {path}: {error.strerror or error}") from None
    valid_length = data.rfind(b"\n") + 1
    lines = data[:valid_length].splitlines()
    if not lines:
        raise ResultsFileError(f"{path} has no complete header line")
    header = _checked_header(path, lines[0])
    size = group_size if group_size is not None else header["definition"].get("group_size")
    by_attempt: dict[tuple[int, int], list[RolloutRecord]] = {}
    parsed: dict[int, Trajectory] = {}
    scan = _Scan(header=header, valid_length=valid_length)
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        record = _checked_record(path, number, raw)
        index, attempt = int(record["example_index"]), int(record["attempt"])
        if keep_records:
            try:
                parsed[id(record)] = Trajectory.from_json(record)
            except (TypeError, ValueError) as error:
                raise ResultsFileError(
                    f"{path}:{number} is not a rollout record: {error}"
                ) from None
        else:  # a resume keeps only what the summary needs, never transcripts
            record = {key: record[key] for key in _SUMMARY_FIELDS if key in record}
        by_attempt.setdefault((index, attempt), []).append(cast(RolloutRecord, record))
        scan.attempts[index] = max(attempt, scan.attempts.get(index, 0))
    for (index, _attempt), records in sorted(by_attempt.items()):
        if _is_complete(records, size):
            records.sort(key=lambda r: r["group_index"])
            if keep_records:
                scan.complete_records[index] = [parsed[id(r)] for r in records]
            scan.groups[index] = CompletedGroup(
                example_index=index,
                example_id=records[0]["example_id"],
                termination_reasons=tuple(r["termination_reason"] for r in records),
                rewards=tuple(r["rewards"] for r in records),
                usage=_usage_of(records),
            )
    return scan


_SUMMARY_FIELDS = ("example_id", "group_index", "termination_reason", "rewards", "usage")
"""The fields of a rollout line a resume keeps (``_is_complete`` and ``CompletedGroup``)."""

_FLOAT_MAX = sys.float_info.max


def _record_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields every reader of a rollout line relies on, or ``None``."""
    for name in ("example_id", "termination_reason"):
        if not isinstance(record.get(name), str):
            return f"{name} is not a string"
    if not record["termination_reason"]:
        return "termination_reason is empty"
    group_index = record.get("group_index")
    if not isinstance(group_index, int) or isinstance(group_index, bool):
        return "group_index is not an integer"
    rewards = record.get("rewards")
    if not isinstance(rewards, Mapping):
        return "rewards is not an object"
    for key, value in rewards.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            return f"reward {key!r} is not a number"
        if isinstance(value, int) and not -_FLOAT_MAX <= value <= _FLOAT_MAX:
            return f"reward {key!r} is too large for a float"
    return None


def _usage_of(
    records: Sequence[Mapping[str, Any]],
) -> tuple[Mapping[str, object] | None, ...] | None:
    if not all("usage" in record for record in records):
        return None
    return tuple(r["usage"] if isinstance(r["usage"], Mapping) else None for r in records)


def _checked_header(path: Path, line: bytes) -> ResultsHeader:
    """The header line, or ``ResultsFileError`` saying why it is not one this version reads."""
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        header = None
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


def _is_complete(records: Sequence[Mapping[str, Any]], group_size: object) -> bool:
    if not isinstance(group_size, int) or len(records) != group_size:
        return False
    if {r.get("group_index") for r in records} != set(range(group_size)):
        return False
    return len({r.get("example_id") for r in records}) == 1


def read_results(path: str | Path) -> Results:
    """Read a results file: its header and the rollouts of complete groups, in example order.

    Partial groups (superseded by a later attempt, or lost to an interruption) are left out.
    The whole file is held in memory; ``iter_results`` streams it instead.
    """
    scan = GroupScan(path, build=True)
    chosen = scan.latest(dict(scan))
    rollouts = tuple(r for index in sorted(chosen) for r in chosen[index])
    return Results(header=scan.header, rollouts=cast(tuple[Trajectory, ...], rollouts))


_T = TypeVar("_T")


class GroupScan:
    """One pass over a results file that yields each complete group as soon as its last line
    is read, as ``((example_index, attempt), records)`` with the records in group order:
    ``Trajectory`` records when ``build``, dicts of the summary fields (plus
    ``example_index``, ``attempt`` and ``rollout_id``) when false, ``LazyRollout`` when
    ``None``.

    A group that gets another line after it completed is, as ``read_results`` sees it, not
    complete: ``overfull`` collects such keys during the pass, and ``latest`` drops them. So
    a reader can reduce each group to what it keeps the moment it completes (memory: the
    groups still missing lines plus the reductions). Raises ``ResultsFileError`` as
    ``iter_results`` does (the header's at construction)."""

    def __init__(self, path: str | Path, *, build: bool | None) -> None:
        self.path = Path(path)
        self.overfull: set[tuple[int, int]] = set()
        self.header, self._groups = _stream(self.path, build=build, overfull=self.overfull)

    def __iter__(self) -> Iterator[tuple[tuple[int, int], list[Any]]]:
        for group in self._groups:
            yield _key_of(group[0]), group

    def latest(self, kept: Mapping[tuple[int, int], _T]) -> dict[int, _T]:
        """Per example index, what was kept of its complete group of the highest attempt
        (call after the pass; overfull groups are not complete)."""
        chosen: dict[int, tuple[int, _T]] = {}
        for (index, attempt), value in kept.items():
            if (index, attempt) in self.overfull:
                continue
            if index not in chosen or chosen[index][0] < attempt:
                chosen[index] = (attempt, value)
        return {index: value for index, (_attempt, value) in chosen.items()}


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
    reason and rewards only (messages, calls, timings, usage and logs left out), read as a
    stream, so memory holds the rewards of the file, not its text. Raises
    ``ResultsFileError`` as ``read_results`` does."""
    scan = GroupScan(path, build=False)
    kept: dict[tuple[int, int], list[Trajectory]] = {}
    for (index, attempt), group in scan:
        try:
            kept[index, attempt] = [
                Trajectory(
                    rollout_id=str(r.get("rollout_id") or ""),
                    example_id=r["example_id"],
                    termination_reason=r["termination_reason"],
                    rewards=r["rewards"],
                    attempt=attempt,
                    example_index=index,
                    group_index=r["group_index"],
                )
                for r in group
            ]
        except (TypeError, ValueError) as error:
            raise ResultsFileError(
                f"{scan.path}: example {index} has a damaged record: {error}"
            ) from None
    chosen = scan.latest(kept)
    return Results(
        header=scan.header, rollouts=tuple(r for index in sorted(chosen) for r in chosen[index])
    )


def iter_group_summaries(path: str | Path) -> tuple[ResultsHeader, Iterator[CompletedGroup]]:
    """The header, and a stream of each complete group's ``CompletedGroup`` (rewards,
    termination reasons, usage: no transcripts), in file order, for aggregating a file
    too large to hold. Raises ``ResultsFileError`` as ``iter_results`` does."""
    header, groups = _stream(Path(path), build=False)

    def summaries() -> Iterator[CompletedGroup]:
        for group in cast(Iterator[list[dict[str, Any]]], groups):
            yield CompletedGroup(
                example_index=int(group[0]["example_index"]),
                example_id=group[0]["example_id"],
                termination_reasons=tuple(r["termination_reason"] for r in group),
                rewards=tuple(r["rewards"] for r in group),
                usage=_usage_of(group),
            )

    return header, summaries()


@dataclass(frozen=True, slots=True)
class LazyRollout:
    """One rollout line of a streamed file: its checked summary fields now, its
    ``Trajectory`` on demand (``trajectory()``), so a scan holds no transcripts."""

    path: Path
    line: int
    raw: bytes
    fields: Mapping[str, Any]

    def __init__(self, path: Path, line: int, raw: bytes, record: Mapping[str, Any]) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "raw", raw)
        summary = {name: record[name] for name in _SUMMARY_FIELDS if name in record}
        summary["example_index"] = int(record["example_index"])
        summary["attempt"] = int(record["attempt"])
        object.__setattr__(self, "fields", summary)

    @property
    def termination_reason(self) -> str:
        return str(self.fields["termination_reason"])

    @property
    def example_id(self) -> str:
        return str(self.fields["example_id"])

    @property
    def rewards(self) -> Mapping[str, float]:
        return cast(Mapping[str, float], self.fields["rewards"])

    def trajectory(self) -> Trajectory:
        """The whole record; raises ``ResultsFileError`` naming ``file:line``."""
        try:
            return Trajectory.from_json(json.loads(self.raw))
        except (TypeError, ValueError, RecursionError) as error:
            raise ResultsFileError(
                f"{self.path}:{self.line} is not a rollout record: {error}"
            ) from None


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
    header = _checked_header(path, first[1])
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
    completed: set[tuple[int, int]] = set()
    for number, raw in lines:
        if not raw.strip():
            continue
        record = _checked_record(path, number, raw)
        key = (int(record["example_index"]), int(record["attempt"]))
        if overfull is not None and key in completed:
            overfull.add(key)
            continue
        item: Any
        if build is None:
            item = LazyRollout(path, number, raw, record)
        elif build:
            try:
                item = Trajectory.from_json(record)
            except (TypeError, ValueError) as error:
                raise ResultsFileError(
                    f"{path}:{number} is not a rollout record: {error}"
                ) from None
        else:
            item = {name: record[name] for name in _SUMMARY_FIELDS if name in record}
            item["example_index"], item["attempt"] = key
            item["rollout_id"] = record.get("rollout_id")
        records = pending.setdefault(key, [])
        records.append((record["group_index"], record["example_id"], item))
        if _complete(records, size):
            del pending[key]
            if overfull is not None:
                completed.add(key)
            yield [r[2] for r in sorted(records, key=lambda r: r[0])]


def _complete(records: Sequence[tuple[Any, Any, Any]], size: object) -> bool:
    """Whether ``(group_index, example_id, _)`` entries make a whole group of ``size``."""
    return (
        isinstance(size, int)
        and len(records) == size
        and {r[0] for r in records} == set(range(size))
        and len({r[1] for r in records}) == 1
    )


def _checked_record(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    try:
        record = json.loads(raw)
        int(record["example_index"]), int(record["attempt"])
    except RecursionError:
        raise ResultsFileError(
            f"{path}:{number} is not a rollout record: JSON nested too deeply"
        ) from None
    except (ValueError, KeyError, TypeError) as error:
        raise ResultsFileError(f"{path}:{number} is not a rollout record: {error}") from None
    problem = _record_problem(record)
    if problem is not None:
        raise ResultsFileError(f"{path}:{number} is not a rollout record: {problem}")
    return cast(dict[str, Any], record)


class ResultsStore:
    """The results of one run: groups already complete (resumed) and an appender for new ones.

    The file stays open, and locked against other runs where the platform allows, until
    ``close``. Every string written (transcripts, logs, example ids) has the known
    ``secrets`` masked.
    """

    def __init__(
        self,
        path: Path | None,
        handle: BinaryIO | None,
        run_id: str,
        groups: dict[int, CompletedGroup],
        attempts: dict[int, int],
        secrets: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.groups = groups
        self._attempts = attempts
        self._file = handle
        self._secrets = tuple(s for s in secrets if s)
        self._secrets_as_written = tuple(
            json.dumps(s, ensure_ascii=False)[1:-1].encode("utf-8", "backslashreplace")
            for s in self._secrets
        )
        self._failure: ResultsWriteError | None = None

    @classmethod
    def open(
        cls,
        path: Path | None,
        definition: Mapping[str, Any],
        *,
        group_size: int,
        force: bool,
        secrets: Sequence[str] = (),
        data_dir: Path | None = None,
        reward_weights: Mapping[str, float] | None = None,
    ) -> ResultsStore:
        """Start a new results file at ``path``, or resume the one already there.

        Known ``secrets`` are masked in the header's definition as in every line. A new
        file's header records ``data_dir`` (made absolute) and ``reward_weights`` when
        given. A definition that
        differs only by a larger ``max_examples`` (or none) resumes without ``force``; the
        header then takes the new definition, the old one joining ``previous_definitions``.
        Raises ``ResumeMismatchError`` (definition differs, no ``force``),
        ``ResultsFileError`` (not a readable results file, or in use by another run) and
        ``ResultsWriteError`` (the file cannot be created or written).
        """
        # The definition is masked before it is compared or written: a secret passed as a
        # sampling argument never reaches the header, and resuming compares masked forms.
        masked = tuple(s for s in secrets if s)
        definition = _mask_strings(_normalized(dict(definition)), masked)
        if path is None:
            return cls(None, None, new_run_id(), {}, {}, secrets)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = _open_locked(path)
        except OSError as error:
            raise ResultsWriteError(path, error, "open") from None
        try:
            if handle.seek(0, os.SEEK_END) == 0:
                run_id = new_run_id()
                header = results_header(
                    run_id, definition, data_dir=data_dir, reward_weights=reward_weights
                )
                if "data_dir" in header:
                    header["data_dir"] = _mask_strings(header["data_dir"], masked)
                _append_or_cut(handle, path, encoded_line(header))
                return cls(path, handle, run_id, {}, {}, secrets)
            scan = _scan(path, group_size, keep_records=False)
            recorded = scan.header["definition"]
            differences = definition_differences(recorded, definition)
            if differences and not force and not _only_extends(recorded, definition):
                raise ResumeMismatchError(str(path), differences)
            if differences:
                _rewrite_header(path, scan, definition)
                handle.close()
                handle = _open_locked(path)
            elif scan.valid_length != handle.tell():
                handle.truncate(scan.valid_length)
        except OSError as error:
            handle.close()
            raise ResultsWriteError(path, error) from None
        except BaseException:
            handle.close()
            raise
        run_id = str(scan.header.get("run_id") or new_run_id())
        return cls(path, handle, run_id, scan.groups, scan.attempts, secrets)

    def is_complete(self, example_index: int, example_id: str) -> bool:
        group = self.groups.get(example_index)
        return group is not None and group.example_id == example_id

    def next_attempt(self, example_index: int) -> int:
        return self._attempts.get(example_index, 0) + 1

    def append_group(self, group: CompletedGroup, trajectories: Iterable[Trajectory]) -> None:
        """Write one complete group's lines at once (unbuffered), then remember it.

        A failed write is cut back to where the group started and raises
        ``ResultsWriteError``; so does every later call (the run has to stop).
        """
        if self._file is not None:
            if self._failure is not None:
                raise self._failure
            data = b"".join(self._masked_line(t.to_json()) for t in trajectories)
            try:
                _append_or_cut(self._file, self.path, data)
            except ResultsWriteError as failure:
                self._failure = failure
                raise
        self.groups[group.example_index] = group

    def _masked_line(self, record: Mapping[str, Any]) -> bytes:
        """The record's line with every secret masked; the record is only walked when a
        secret occurs in its line (as JSON writes it)."""
        line = encoded_line(record)
        if any(secret in line for secret in self._secrets_as_written):
            line = encoded_line(_mask_strings(record, self._secrets))
        return line

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _append_or_cut(handle: BinaryIO, path: Path | None, data: bytes) -> None:
    """Append ``data`` whole, or leave the file as it was and raise ``ResultsWriteError``."""
    start = handle.seek(0, os.SEEK_END)
    try:
        _write_all(handle, data)
    except OSError as error:
        failure = ResultsWriteError(path, error)
        try:
            handle.truncate(start)
        except OSError as cut_error:
            failure.add_note(f"cutting the partial group back also failed: {cut_error}")
        raise failure from error


def _mask_strings(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every secret masked in each string it holds (keys included)."""
    if isinstance(value, str):
        return mask_secrets(value, secrets)
    if isinstance(value, Mapping):
        return {
            _mask_strings(key, secrets): _mask_strings(item, secrets) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask_strings(item, secrets) for item in value]
    return value


def _open_locked(path: Path) -> BinaryIO:
    """``path`` opened for appending (created if missing), locked against other runs."""
    handle: BinaryIO = open(path, "a+b", buffering=0)
    if fcntl is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise ResultsFileError(f"{path} is in use by another run") from None
    return handle


def _write_all(handle: BinaryIO, data: bytes) -> None:
    """Write all of ``data``, continuing after short writes; a write that makes no
    progress raises ``OSError`` instead of looping."""
    view = memoryview(data)
    while view:
        written = handle.write(view)
        if not written:
            raise OSError(errno.EIO, "the results file accepted no more bytes")
        view = view[written:]


def results_header(
    run_id: str,
    definition: Mapping[str, Any],
    *,
    rescored_from: Mapping[str, Any] | None = None,
    data_dir: Path | None = None,
    reward_weights: Mapping[str, float] | None = None,
) -> ResultsHeader:
    """The header line of a new results file (``rescored_from``: set by ``rescore``;
    ``data_dir``: the data directory, recorded made absolute; ``reward_weights``: the
    environment's, when it sets them)."""
    header: ResultsHeader = {
        "type": "header",
        "format": RESULTS_FORMAT,
        "run_id": run_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "benchmax_version": benchmax.__version__,
        "definition": dict(definition),
    }
    if rescored_from is not None:
        header["rescored_from"] = dict(rescored_from)
    if data_dir is not None:
        header["data_dir"] = str(Path(data_dir).absolute())
    if reward_weights is not None:
        header["reward_weights"] = {str(k): float(v) for k, v in reward_weights.items()}
    return header


def _rewrite_header(path: Path, scan: _Scan, definition: Mapping[str, Any]) -> None:
    """Replace the header (the old definition joins ``previous_definitions``), atomically,
    through an exclusive temporary file; a symlinked ``path`` is written through to its
    target and stays a link."""
    data = path.read_bytes()[: scan.valid_length]
    body = data[data.find(b"\n") + 1 :]
    header = scan.header.copy()
    header["previous_definitions"] = [
        *header.get("previous_definitions", []),
        header["definition"],
    ]
    header["definition"] = dict(definition)
    replace_file(path, (encoded_line(header), body))


def encoded_line(record: Mapping[str, Any]) -> bytes:
    """One JSON line, UTF-8; never fails on the values a record holds.

    Text UTF-8 cannot encode (lone surrogates from a model's ``\\ud800`` escape) is written
    as the JSON escape ``\\ud800``, which JSON readers turn back into the same string.
    Keys that are not strings, cycles (``"<cycle>"``), nesting deeper than 200 levels
    (``"<too deep>"``) and objects JSON has no form for are written as text; so is an
    integer too long for Python to write in decimal (more than ``sys.get_int_max_str_digits()``
    digits), as its ``0x`` hexadecimal text. Non-finite floats are written as JSON's
    common extension ``NaN``/``Infinity``/``-Infinity``, which ``json.loads`` reads back.
    """
    try:
        text = json.dumps(record, ensure_ascii=False, default=_text)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(_plain(record, ()), ensure_ascii=False)
    # Outside strings JSON text is ASCII, and inside them a backslash is escaped, so
    # "backslashreplace" turns exactly the unencodable characters into JSON escapes.
    return (text + "\n").encode("utf-8", "backslashreplace")


def _text(value: object) -> str:
    """What a value JSON cannot represent is written as."""
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def _plain(value: Any, seen: tuple[int, ...]) -> Any:
    """``value`` as plain JSON data: string keys, no cycles, text for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _decimal_writable(value) else hex(value)
    if value is None or isinstance(value, str | float | bool):
        return value
    if id(value) in seen or len(seen) > 200:
        return "<cycle>" if id(value) in seen else "<too deep>"
    inner = (*seen, id(value))
    if isinstance(value, Mapping):
        return {_key(key): _plain(item, inner) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, inner) for item in value]
    return _text(value)


def _decimal_writable(value: int) -> bool:
    try:
        str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        return False
    return True


def _key(key: object) -> str:
    return key if isinstance(key, str) else _text(key)
