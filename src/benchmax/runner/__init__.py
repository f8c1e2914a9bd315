"""The local runner: run an environment's examples as rollout groups against one endpoint.

``run_environment(env, RunConfig(...))`` runs a split through ``env.run_group``, appends
every completed group to a resumable results file (``benchmax.results``) and returns a
``RunReport``; ``run_definition`` is what that file's header records. ``executor=
RayExecutor(...)`` runs the groups on a Ray cluster instead (``benchmax[ray]``).
``rescore_results`` scores a results file's stored transcripts again; ``score_replies``
scores fixed replies (a production model's logs) to a split's examples the same way.
``HookDeadlines`` (``RunConfig.hook_deadlines``) bound the hooks an environment leaves
unbounded, so a hook that never returns settles its rollout and is named.

Reading, comparing and viewing results live in ``benchmax.results``; their old names here
(``benchmax.runner.read_results`` and the rest) still work for one release, with a
``DeprecationWarning``.
"""

from benchmax._hook_deadlines import HookDeadlines
from benchmax._lazy_names import moved_attribute
from benchmax.results import ResumeMismatchError, RunError, RunReport
from benchmax.runner._config import NoModelAuth, RunConfig, rollout_seed
from benchmax.runner._definition import run_definition
from benchmax.runner._errors import ExecutorError, GroupContractError
from benchmax.runner._failure_share import FailureShareExceeded
from benchmax.runner._judge_check import JudgeCheckError
from benchmax.runner._ray import RayExecutor
from benchmax.runner._replies import FixedReply, score_replies
from benchmax.runner._rescore import RESCORED_REASONS, RescoreReport, rescore_results
from benchmax.runner._run import Progress, run_environment

__all__ = [
    "RESCORED_REASONS",
    "ExecutorError",
    "FailureShareExceeded",
    "FixedReply",
    "GroupContractError",
    "HookDeadlines",
    "JudgeCheckError",
    "NoModelAuth",
    "Progress",
    "RayExecutor",
    "RescoreReport",
    "ResumeMismatchError",
    "RunConfig",
    "RunError",
    "RunReport",
    "rescore_results",
    "rollout_seed",
    "run_definition",
    "run_environment",
    "score_replies",
]

_MOVED = {
    name: ("benchmax.results", name)
    for name in (
        "RESULTS_FORMAT",
        "Comparison",
        "ExampleChange",
        "FileSelection",
        "HtmlReport",
        "KeyComparison",
        "PassAtK",
        "Results",
        "ResultsFileError",
        "ResultsWriteError",
        "RewardStats",
        "RolloutFilter",
        "UsageStats",
        "bootstrap_interval",
        "compare_files",
        "compare_results",
        "groups_of",
        "iter_results",
        "pass_at_k",
        "pass_at_k_metrics",
        "read_results",
        "read_results_summary",
        "render_html_report",
        "report_data",
        "select_from_file",
        "select_rollouts",
        "write_html_report",
    )
}
_MOVED["ResultGroup"] = ("benchmax.results", "TrajectoryGroup")


def __getattr__(name: str) -> object:
    """The names that moved to ``benchmax.results`` (deprecated here)."""
    return moved_attribute(globals(), _MOVED, name)
