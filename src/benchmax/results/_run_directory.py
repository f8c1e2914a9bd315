"""The files of a training run directory, and the writers that fill them as it goes.

Layout (``RunDirectory``)::

    OUTPUT/config.toml            the effective TrainConfig
    OUTPUT/rollouts.jsonl         training rollouts (benchmax.results/1 + step, weights_version)
    OUTPUT/metrics.jsonl          one JSON object per optimizer step
    OUTPUT/eval/step-N.jsonl      the eval split against the weights after step N (0: the base)
    OUTPUT/eval/compare.json      base vs final (benchmax compare --json)
    OUTPUT/checkpoints/step-N/    weights for from_pretrained (LoRA: adapters), trainer state
    OUTPUT/training.html          the page benchmax view OUTPUT writes
    OUTPUT/.train.lock            held (flock) by the one process training into OUTPUT

Resuming at step ``S`` cuts the lines of later steps out of ``rollouts.jsonl`` and
``metrics.jsonl`` (and removes later eval files), so the resumed run appends each step once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shutil
import struct
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from benchmax._file_replace import replace_file
from benchmax.results._compare import Comparison, compare_results
from benchmax.results._errors import RunError
from benchmax.results._group import TrajectoryGroup
from benchmax.results._line_encoding import encoded_line
from benchmax.results._reading import read_results
from benchmax.results._records import RunDefinition
from benchmax.results._step_metrics import MetricsLine
from benchmax.results._store import ResultsStore
from benchmax.trajectory import Trajectory

try:
    import fcntl
except ImportError:  # Windows: no advisory lock, one run per directory is up to the user
    fcntl = None  # type: ignore[assignment]  # the module or None, by platform

__all__ = ["MetricsWriter", "RolloutsWriter", "RunDirectory", "read_metrics"]

_STEP_DIR = re.compile(r"^step-(\d+)$")
_EVAL_FILE = re.compile(r"^step-(\d+)\.jsonl$")


@dataclasses.dataclass(frozen=True, slots=True)
class RunDirectory:
    """Where each file of the run in ``root`` lives (see the module docstring)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def rollouts(self) -> Path:
        return self.root / "rollouts.jsonl"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    @property
    def compare(self) -> Path:
        return self.eval_dir / "compare.json"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def page(self) -> Path:
        return self.root / "training.html"

    @property
    def lock(self) -> Path:
        return self.root / ".train.lock"

    def eval_file(self, step: int) -> Path:
        return self.eval_dir / f"step-{step}.jsonl"

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step-{step}"

    def eval_steps(self) -> list[int]:
        """The steps with an eval file, ascending."""
        if not self.eval_dir.is_dir():
            return []
        found = (_EVAL_FILE.match(p.name) for p in self.eval_dir.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def checkpoint_steps(self) -> list[int]:
        """The steps with a complete checkpoint (its ``trainer_state.json`` written), ascending."""
        if not self.checkpoints.is_dir():
            return []
        steps = []
        for path in self.checkpoints.iterdir():
            match = _STEP_DIR.match(path.name)
            if match and (path / "trainer_state.json").is_file():
                steps.append(int(match.group(1)))
        return sorted(steps)

    @contextlib.contextmanager
    def claimed(self) -> Iterator[None]:
        """Hold the directory for one run: checking what it holds, writing its config and
        training all happen inside, so a second run into it stops before writing anything.

        Creates ``root`` when missing. Raises ``RunError`` when another process holds it.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.lock, "ab") as handle:
            if fcntl is not None:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    raise RunError(
                        f"{self.root} is in use by another training run (it holds {self.lock}); "
                        "wait for it to end or choose another output directory"
                    ) from None
            yield  # closing the file releases the lock

    def torn_checkpoint_file(self, step: int) -> tuple[Path, str] | None:
        """The first file of checkpoint ``step`` that is cut short or empty, with what is
        wrong with it; ``None`` when every JSON, safetensors and torch file reads whole.

        Checks shapes only (no torch needed): JSON parses, a safetensors file is as long as
        its header says, a torch file (``.pt``, ``.pth``, ``.bin``) is a complete zip archive.
        """
        for path in sorted(self.checkpoint(step).rglob("*")):
            if path.is_file():
                problem = _torn_file_problem(path)
                if problem is not None:
                    return path, problem
        return None

    def holds_run(self) -> bool:
        """Whether a run was started here (a config, rollouts or checkpoints exist)."""
        return self.config.exists() or self.rollouts.exists() or bool(self.checkpoint_steps())

    def cut_after(self, step: int) -> None:
        """Drop what steps after ``step`` wrote: their rollout and metrics lines, their eval
        files and checkpoints (a resume from ``step`` writes them again)."""
        for path in (self.rollouts, self.metrics):
            if path.is_file():
                _keep_lines(path, step, header=path == self.rollouts)
        for later in self.eval_steps():
            if later > step:
                for sibling in self.eval_dir.glob(f"step-{later}.*"):
                    sibling.unlink()
        self.compare.unlink(missing_ok=True)
        for later in self.checkpoint_steps():
            if later > step:
                shutil.rmtree(self.checkpoint(later))


def _torn_file_problem(path: Path) -> str | None:
    suffix = path.suffix
    if suffix not in {".json", ".safetensors", ".pt", ".pth", ".bin"}:
        return None
    size = path.stat().st_size
    if size == 0:
        return "the file is empty"
    if suffix == ".json":
        try:
            json.loads(path.read_bytes())
        except ValueError as error:
            return f"not valid JSON ({error}): cut short?"
        return None
    if suffix == ".safetensors":
        return _safetensors_problem(path, size)
    if not zipfile.is_zipfile(path):
        return "not a complete torch file (its zip archive has no end): cut short?"
    return None


def _safetensors_problem(path: Path, size: int) -> str | None:
    """A safetensors file: an 8-byte little-endian header length, the JSON header, then
    the tensors, the last ending at the largest ``data_offsets`` end."""
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"{size} bytes, shorter than a safetensors header"
        (length,) = struct.unpack("<Q", head)
        if 8 + length > size:
            return f"{size} bytes, cut inside its header ({8 + length} bytes)"
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return "its safetensors header is not valid JSON"
    ends = [
        entry["data_offsets"][1]
        for entry in (header.values() if isinstance(header, dict) else ())
        if isinstance(entry, dict) and isinstance(entry.get("data_offsets"), list)
    ]
    expected = 8 + length + max((e for e in ends if isinstance(e, int)), default=0)
    if size < expected:
        return f"{size} bytes of the {expected} its header lists: cut short"
    return None


def _keep_lines(path: Path, step: int, *, header: bool) -> None:
    data = path.read_bytes()
    data = data[: data.rfind(b"\n") + 1]  # a torn last line goes
    kept: list[bytes] = []
    for number, line in enumerate(data.splitlines(keepends=True)):
        if header and number == 0:
            kept.append(line)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        line_step = record.get("step") if isinstance(record, dict) else None
        if isinstance(line_step, int) and line_step <= step:
            kept.append(line)
    replace_file(path, kept)


class RolloutsWriter:
    """Appends each training group to ``rollouts.jsonl`` as it completes (thread-safe).

    The file is a results file (``ResultsStore``: masked, flushed, locked against a second
    run); each rollout line carries ``step`` and ``weights_version``, and its
    ``example_index`` is the group's place in the file (``(step - 1) * prompts_per_step``
    plus the order in which the step's groups completed).
    """

    def __init__(self, path: Path, definition: RunDefinition, *, prompts_per_step: int) -> None:
        self._store = ResultsStore.open(path, definition)
        self._per_step = prompts_per_step
        self._lock = threading.Lock()
        self._done: dict[int, int] = {}

    @property
    def run_id(self) -> str:
        return self._store.run_id

    def append(
        self, step: int, weights_version: int, trajectories: Sequence[Trajectory]
    ) -> tuple[Trajectory, ...]:
        """Write one group of ``step``; returns the records as written."""
        with self._lock:
            place = self._done.get(step, 0)
            self._done[step] = place + 1
            index = (step - 1) * self._per_step + place
            records = tuple(
                dataclasses.replace(
                    t,
                    run_id=self._store.run_id,
                    example_index=index,
                    step=step,
                    weights_version=weights_version,
                )
                for t in trajectories
            )
            self._store.append(TrajectoryGroup(records))
            return records

    def close(self) -> None:
        self._store.close()


class MetricsWriter:
    """Appends one JSON line per step to ``metrics.jsonl`` (flushed at once)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab", buffering=0)  # closed by close()

    def append(self, metrics: Mapping[str, object]) -> None:
        self._file.write(encoded_line(metrics))

    def close(self) -> None:
        self._file.close()


def read_metrics(
    path: Path, *, skipped: Callable[[int, str], None] | None = None
) -> Iterator[MetricsLine]:
    """The step lines of a ``metrics.jsonl``, in order.

    A line that is not a JSON object with an integer ``step``, or whose documented fields
    (``MetricsLine``) have the wrong type, is skipped and passed to ``skipped`` (its 1-based
    line number and what is wrong); a torn last line (a run still writing) is skipped quietly.
    """
    if not path.is_file():
        return
    lines = path.read_bytes().splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            if skipped is not None and number < len(lines) and line.strip():
                skipped(number, "not a JSON line")
            continue
        problem = _metrics_problem(record)
        if problem is None:
            yield cast(MetricsLine, record)  # checked field by field above
        elif skipped is not None:
            skipped(number, problem)


_STEP_LIMIT = 2**53  # a step beyond this is no count of optimizer steps (nor exact as a float)
_NUMBER_FIELDS = (
    "weights_version",
    "groups",
    "rollouts",
    "reward",
    "reward_std",
    "zero_variance_group_share",
    "non_trainable_share",
    "token_prefix_breaks",
)
_NUMBER_MAP_FIELDS = ("rewards", "advantage", "completion_tokens", "seconds", "trainer")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _metrics_problem(record: object) -> str | None:
    """What makes ``record`` no ``metrics.jsonl`` step line, or ``None``."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    step = record.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < _STEP_LIMIT:
        return f"step must be an integer from 0 to 2**53, got {_shown(step)}"
    for name in _NUMBER_FIELDS:
        value = record.get(name)
        if value is not None and not _is_number(value):
            return f"{name} must be a number, got {_shown(value)}"
    for name in _NUMBER_MAP_FIELDS:
        value = record.get(name)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(
            item is None or _is_number(item) for item in value.values()
        ):
            return f"{name} must be an object of numbers, got {_shown(value)}"
    reasons = record.get("termination_reasons")
    if reasons is not None and not (
        isinstance(reasons, dict)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in reasons.values())
    ):
        return f"termination_reasons must be an object of counts, got {_shown(reasons)}"
    return None


def _shown(value: object) -> str:
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):  # an int of over 4,300 digits
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= 40 else text[:37] + "..."


def compare_base(layout: RunDirectory) -> Comparison | None:
    """Base (``eval/step-0``) against the last evaluation, saved as ``eval/compare.json``
    (``benchmax compare --json``'s document); ``None`` with fewer than two evaluations.
    Raises ``ValueError`` when the two share no example or reward key."""
    steps = layout.eval_steps()
    if len(steps) < 2 or steps[0] != 0:
        return None
    base, final = layout.eval_file(0), layout.eval_file(steps[-1])
    comparison = compare_results(read_results(base), read_results(final))
    document = {"a": str(base), "b": str(final), **comparison.to_json()}
    layout.compare.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    return comparison


def saved_comparison(layout: RunDirectory) -> dict[str, Any] | None:
    """``eval/compare.json`` as written by :func:`compare_base`, or ``None``."""
    try:
        data = json.loads(layout.compare.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
