"""The run record: results files, the groups they hold, and everything derived from them.

A run (``benchmax run``, ``run_environment``, an evaluation, ``benchmax train``'s rollouts)
is recorded as a JSONL *results file* (``RESULTS_FORMAT``): a header line defining the run
(``RunDefinition``), then one line per rollout (a ``benchmax.trajectory.Trajectory`` as
JSON), written a whole group at a time. This package is the one place that writes, reads
and derives from it; the runner, the trainer, the CLI and your own scripts all use it.

- Writing: ``ResultsStore.open(path, definition)`` starts or resumes a file and
  ``append(group)`` adds a finished ``TrajectoryGroup``; ``write_results`` writes a whole
  file at once. A training run directory is ``RunDirectory`` (``read_metrics``).
- Reading: ``read_results`` (whole), ``read_results_summary`` (no transcripts),
  ``iter_results``/``read_trajectories`` (streamed), ``groups_of`` (as ``TrajectoryGroup``),
  ``select_rollouts``/``select_from_file`` with a ``RolloutFilter`` (``benchmax show``).
- Deriving: ``summarize`` -> ``RunReport`` (reward stats, reasons, pass@k, usage, learning
  signal), ``compare_results``/``compare_files`` -> ``Comparison`` (paired bootstrap),
  ``pass_at_k``, ``scalar_reward``/``group_advantages`` (also ``TrajectoryGroup.advantages``),
  and the self-contained HTML page (``write_html_report``; ``write_training_page`` for a
  training run directory).

Errors: ``RunError`` is the base of a run's errors; ``ResultsFileError`` (a file that is not
a readable results file, naming ``file:line``), ``ResultsWriteError`` and
``ResumeMismatchError`` derive from it.
"""

from benchmax.results._advantages import AdvantageMethod, group_advantages, scalar_reward
from benchmax.results._compare import (
    Comparison,
    ExampleChange,
    KeyComparison,
    bootstrap_interval,
    compare_files,
    compare_results,
)
from benchmax.results._errors import (
    ResultsFileError,
    ResultsWriteError,
    ResumeMismatchError,
    RunError,
)
from benchmax.results._group import TrajectoryGroup
from benchmax.results._html_report import (
    HtmlReport,
    render_html_report,
    report_data,
    write_html_report,
)
from benchmax.results._metrics import PassAtK, pass_at_k, pass_at_k_metrics
from benchmax.results._reading import (
    RESULTS_FORMAT,
    Results,
    iter_results,
    read_results,
    read_results_summary,
    read_trajectories,
)
from benchmax.results._records import ResultsHeader, RunDefinition
from benchmax.results._report import CoverageStats, RewardStats, RunReport, UsageStats, summarize
from benchmax.results._run_directory import (
    MetricsWriter,
    RolloutsWriter,
    RunDirectory,
    compare_base,
    read_metrics,
)
from benchmax.results._selection import (
    FileSelection,
    RolloutFilter,
    groups_of,
    reward_keys_of,
    select_from_file,
    select_rollouts,
)
from benchmax.results._step_metrics import (
    MetricsLine,
    step_metrics,
    tracker_metrics,
    trainer_metrics,
    trl_advantages,
)
from benchmax.results._store import ResultsStore, new_run_id, write_results
from benchmax.results._training_page import is_training_run, write_training_page
from benchmax.results._view_spool import TRANSCRIPT_BUDGET

__all__ = [
    "RESULTS_FORMAT",
    "TRANSCRIPT_BUDGET",
    "AdvantageMethod",
    "Comparison",
    "CoverageStats",
    "ExampleChange",
    "FileSelection",
    "HtmlReport",
    "KeyComparison",
    "MetricsLine",
    "MetricsWriter",
    "PassAtK",
    "Results",
    "ResultsFileError",
    "ResultsHeader",
    "ResultsStore",
    "ResultsWriteError",
    "ResumeMismatchError",
    "RewardStats",
    "RolloutFilter",
    "RolloutsWriter",
    "RunDefinition",
    "RunDirectory",
    "RunError",
    "RunReport",
    "TrajectoryGroup",
    "UsageStats",
    "bootstrap_interval",
    "compare_base",
    "compare_files",
    "compare_results",
    "group_advantages",
    "groups_of",
    "is_training_run",
    "iter_results",
    "new_run_id",
    "pass_at_k",
    "pass_at_k_metrics",
    "read_metrics",
    "read_results",
    "read_results_summary",
    "read_trajectories",
    "render_html_report",
    "report_data",
    "reward_keys_of",
    "scalar_reward",
    "select_from_file",
    "select_rollouts",
    "step_metrics",
    "summarize",
    "tracker_metrics",
    "trainer_metrics",
    "trl_advantages",
    "write_html_report",
    "write_results",
    "write_training_page",
]
