"""Writing a results file: ``ResultsStore`` starts one or resumes it, and appends groups.

Every completed group is appended with a single write and flushed, so an interrupted run
loses at most the groups in flight. Reopening a file resumes it: complete groups are kept,
groups with missing lines are run again under a new attempt number, and a torn last line
left by a hard kill is cut off.

Writing never fails on what a model, a tool or an environment put in a record (see
``encoded_line``). A group write that fails (disk full) is cut back, so the file still ends
at the last complete group, and raises ``ResultsWriteError``. Known secrets are masked in
every record.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, cast

import benchmax
from benchmax._file_replace import replace_file
from benchmax._secret_masking import MaskedRecords
from benchmax._vocabulary import SCORING_FAILURES
from benchmax.results._definition_changes import definition_differences, normalized, only_extends
from benchmax.results._errors import ResultsFileError, ResultsWriteError, ResumeMismatchError
from benchmax.results._group import TrajectoryGroup
from benchmax.results._line_encoding import encoded_line, mask_strings
from benchmax.results._reading import RESULTS_FORMAT, checked_header
from benchmax.results._records import ResultsHeader, RolloutRecord, RunDefinition
from benchmax.results._rollout_lines import SUMMARY_FIELDS, checked_record, summary_group

__all__ = ["ResultsStore", "new_run_id", "results_header", "write_results"]

try:
    import fcntl
except ImportError:  # Windows: no advisory lock, one run per file is up to the user
    fcntl = None  # type: ignore[assignment]  # the module or None, by platform


def new_run_id() -> str:
    """A Harbor-safe run id: UTC timestamp plus random hex, e.g. ``20260101T120000-3f9a2c``."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.urandom(3).hex()}"


@dataclass(slots=True)
class _Scan:
    """What a resume needs of the file already there: its header, where its last complete
    line ends, its complete groups' summaries and each example's highest attempt."""

    header: ResultsHeader
    valid_length: int
    groups: dict[int, TrajectoryGroup] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)


def _scan(path: Path, group_size: int) -> _Scan:
    """The resume scan of ``path``: only the summary fields of each line are kept, never
    transcripts."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ResultsFileError(f"cannot read {path}: {error.strerror or error}") from None
    valid_length = data.rfind(b"\n") + 1
    lines = data[:valid_length].splitlines()
    if not lines:
        raise ResultsFileError(f"{path} has no complete header line")
    header = checked_header(path, lines[0])
    by_attempt: dict[tuple[int, int], list[RolloutRecord]] = {}
    scan = _Scan(header=header, valid_length=valid_length)
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        record = checked_record(path, number, raw)
        index, attempt = int(record["example_index"]), int(record["attempt"])
        kept = {key: record[key] for key in SUMMARY_FIELDS if key in record}
        by_attempt.setdefault((index, attempt), []).append(cast(RolloutRecord, kept))
        scan.attempts[index] = max(attempt, scan.attempts.get(index, 0))
    for (index, attempt), records in sorted(by_attempt.items()):
        if _is_complete(records, group_size):
            records.sort(key=lambda r: r["group_index"])
            scan.groups[index] = summary_group(path, records, index, attempt)
    return scan


def _scoring_failures(scan: _Scan) -> int:
    """How many rollouts of the scan's complete groups ended with a scoring failure."""
    return sum(
        t.termination_reason in SCORING_FAILURES
        for group in scan.groups.values()
        for t in group.trajectories
    )


def _is_complete(records: Sequence[Mapping[str, Any]], group_size: object) -> bool:
    if not isinstance(group_size, int) or len(records) != group_size:
        return False
    if {r.get("group_index") for r in records} != set(range(group_size)):
        return False
    return len({r.get("example_id") for r in records}) == 1


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
        groups: dict[int, TrajectoryGroup],
        attempts: dict[int, int],
        secrets: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.groups = groups
        self._attempts = attempts
        self._file = handle
        self._lines = MaskedRecords(secrets)
        self._failure: ResultsWriteError | None = None

    @classmethod
    def open(
        cls, path: Path | None, definition: RunDefinition, *, force: bool = False
    ) -> ResultsStore:
        """Start a new results file at ``path``, or resume the one already there
        (``None``: keep nothing on disk, only the groups appended).

        The definition's ``secrets`` are masked in the header as in every line. A new
        file's header records the definition's ``data_dir`` (made absolute) and
        ``reward_weights`` when given. A definition that differs only by a larger
        ``max_examples`` (or none) resumes without ``force``; the header then takes the new
        definition, the old one joining ``previous_definitions``.
        Raises ``ResumeMismatchError`` (definition differs, no ``force``),
        ``ResultsFileError`` (not a readable results file, or in use by another run) and
        ``ResultsWriteError`` (the file cannot be created or written).
        """
        # The definition is masked before it is compared or written: a secret passed as a
        # sampling argument never reaches the header, and resuming compares masked forms.
        secrets = definition.secrets
        fields = mask_strings(normalized(dict(definition.fields)), secrets)
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
                    run_id,
                    fields,
                    data_dir=definition.data_dir,
                    reward_weights=definition.reward_weights,
                )
                if "data_dir" in header:
                    header["data_dir"] = mask_strings(header["data_dir"], secrets)
                _append_or_cut(handle, path, encoded_line(header))
                return cls(path, handle, run_id, {}, {}, secrets)
            scan = _scan(path, definition.group_size)
            recorded = scan.header["definition"]
            differences = definition_differences(recorded, fields)
            if differences and not force and not only_extends(recorded, fields):
                raise ResumeMismatchError(str(path), differences, _scoring_failures(scan))
            if differences:
                _rewrite_header(path, scan, fields)
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

    def append(self, group: TrajectoryGroup) -> None:
        """Write one complete group's lines at once (unbuffered), then remember it under
        its ``example_index``.

        A failed write is cut back to where the group started and raises
        ``ResultsWriteError``; so does every later call (the run has to stop).
        """
        if self._file is not None:
            if self._failure is not None:
                raise self._failure
            data = b"".join(
                self._lines.encoded(t.to_json(), encoded_line) for t in group.trajectories
            )
            try:
                _append_or_cut(self._file, self.path, data)
            except ResultsWriteError as failure:
                self._failure = failure
                raise
        self.groups[group.example_index or 0] = group

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


def write_results(
    path: str | Path,
    definition: RunDefinition,
    groups: Iterable[TrajectoryGroup],
    *,
    run_id: str | None = None,
    rescored_from: Mapping[str, Any] | None = None,
) -> str:
    """Write a whole results file at once: its header from ``definition`` (with
    ``rescored_from`` when given), then every group's lines in the order given.

    The file is written beside ``path`` first and moved into place, so ``path`` holds the
    old file or the new one, never a part. Strings are written as ``ResultsStore`` writes
    them (text JSON cannot encode escaped, the definition's secrets masked). Returns the
    run id (``run_id``, or a new one). Raises ``OSError`` when the file cannot be written.
    """
    run_id = run_id or new_run_id()
    secrets = definition.secrets
    header = results_header(
        run_id,
        mask_strings(dict(definition.fields), secrets),
        rescored_from=rescored_from,
        data_dir=definition.data_dir,
        reward_weights=definition.reward_weights,
    )

    masked = MaskedRecords(secrets)

    def lines() -> Iterator[bytes]:
        yield encoded_line(header)
        for group in groups:
            for trajectory in group.trajectories:
                yield masked.encoded(trajectory.to_json(), encoded_line)

    replace_file(Path(path), lines())
    return run_id
