"""The files of a training run directory, and the writers that fill them as it goes.

Layout (``RunDirectory``)::

    OUTPUT/config.toml            the effective TrainConfig
    OUTPUT/rollouts.jsonl         training rollouts (benchmax.results/1 + step, weights_version)
    OUTPUT/metrics.jsonl          one JSON object per optimizer step
    OUTPUT/eval/step-N.jsonl      the eval split against the weights after step N (0: the base)
    OUTPUT/eval/compare.json      base vs final (benchmax compare --json)
    OUTPUT/checkpoints/step-N/    weights for from_pretrained (LoRA: adapters), trainer state
    OUTPUT/training.html          the page benchmax view OUTPUT writes

Resuming at step ``S`` cuts the lines of later steps out of ``rollouts.jsonl`` and
``metrics.jsonl`` (and removes later eval files), so the resumed run appends each step once.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from benchmax._file_replace import replace_file
from benchmax.results._compare import Comparison, compare_results
from benchmax.results._group import TrajectoryGroup
from benchmax.results._line_encoding import encoded_line
from benchmax.results._reading import read_results
from benchmax.results._records import RunDefinition
from benchmax.results._step_metrics import MetricsLine
from benchmax.results._store import ResultsStore
from benchmax.trajectory import Trajectory

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


def read_metrics(path: Path) -> Iterator[MetricsLine]:
    """The step lines of a ``metrics.jsonl`` (a torn or foreign line is skipped), in order."""
    if not path.is_file():
        return
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            yield cast(MetricsLine, record)  # a line MetricsWriter wrote


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
