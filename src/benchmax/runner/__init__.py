"""The local runner: run an environment's examples as rollout groups against one endpoint.

``run_environment(env, RunConfig(...))`` runs a split through ``env.run_group``, appends
every completed group to a resumable JSONL results file and returns a ``RunReport``.
Reading results: ``read_results`` (``iter_results`` streams a file); ``write_html_report``
(the ``view`` page), ``select_rollouts``/``select_from_file`` (``show``),
``rescore_results`` (score stored transcripts again) and ``compare_results`` (paired
comparison of two runs); ``score_replies`` scores fixed replies (a production model's logs)
to a split's examples the way rescore does.
``executor=RayExecutor(...)`` runs the groups on a Ray cluster instead (``benchmax[ray]``).
``HookDeadlines`` (``RunConfig.hook_deadlines``) bound the hooks an environment leaves
unbounded, so a hook that never returns settles its rollout and is named.
"""

from benchmax._hook_deadlines import HookDeadlines
from benchmax.runner._compare import (
    Comparison,
    ExampleChange,
    KeyComparison,
    bootstrap_interval,
    compare_files,
    compare_results,
)
from benchmax.runner._config import NoModelAuth, RunConfig, rollout_seed
from benchmax.runner._errors import (
    ExecutorError,
    GroupContractError,
    ResultsFileError,
    ResultsWriteError,
    ResumeMismatchError,
    RunError,
)
from benchmax.runner._failure_share import FailureShareExceeded
from benchmax.runner._html_report import (
    HtmlReport,
    render_html_report,
    report_data,
    write_html_report,
)
from benchmax.runner._judge_check import JudgeCheckError
from benchmax.runner._metrics import PassAtK, pass_at_k, pass_at_k_metrics
from benchmax.runner._ray import RayExecutor
from benchmax.runner._replies import FixedReply, score_replies
from benchmax.runner._report import RewardStats, RunReport, UsageStats
from benchmax.runner._rescore import RESCORED_REASONS, RescoreReport, rescore_results
from benchmax.runner._results import (
    RESULTS_FORMAT,
    Results,
    iter_results,
    read_results,
    read_results_summary,
)
from benchmax.runner._run import Progress, run_environment
from benchmax.runner._selection import (
    FileSelection,
    ResultGroup,
    RolloutFilter,
    groups_of,
    select_from_file,
    select_rollouts,
)

__all__ = [
    "RESCORED_REASONS",
    "RESULTS_FORMAT",
    "Comparison",
    "ExampleChange",
    "ExecutorError",
    "FailureShareExceeded",
    "FixedReply",
    "GroupContractError",
    "HookDeadlines",
    "HtmlReport",
    "JudgeCheckError",
    "KeyComparison",
    "NoModelAuth",
    "PassAtK",
    "Progress",
    "RayExecutor",
    "RescoreReport",
    "ResultGroup",
    "Results",
    "ResultsFileError",
    "ResultsWriteError",
    "ResumeMismatchError",
    "RewardStats",
    "RolloutFilter",
    "RunConfig",
    "RunError",
    "RunReport",
    "UsageStats",
    "bootstrap_interval",
    "compare_files",
    "compare_results",
    "groups_of",
    "pass_at_k",
    "pass_at_k_metrics",
    "iter_results",
    "read_results",
    "read_results_summary",
    "render_html_report",
    "report_data",
    "rescore_results",
    "rollout_seed",
    "run_environment",
    "score_replies",
    "select_from_file",
    "select_rollouts",
    "FileSelection",
    "write_html_report",
]
