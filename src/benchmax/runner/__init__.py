"""The local runner: run an environment's examples as rollout groups against one endpoint.

``run_environment(env, RunConfig(...))`` runs a split through ``env.run_group``, appends
every completed group to a resumable JSONL results file and returns a ``RunReport``.
``executor=RayExecutor(...)`` runs the groups on a Ray cluster instead (``benchmax[ray]``).
"""

from benchmax.runner._config import NoModelAuth, RunConfig
from benchmax.runner._errors import (
    ExecutorError,
    GroupContractError,
    ResultsFileError,
    ResumeMismatchError,
    RunError,
)
from benchmax.runner._ray import RayExecutor
from benchmax.runner._report import RewardStats, RunReport
from benchmax.runner._results import RESULTS_FORMAT, Results, read_results
from benchmax.runner._run import Progress, run_environment

__all__ = [
    "RESULTS_FORMAT",
    "ExecutorError",
    "GroupContractError",
    "NoModelAuth",
    "Progress",
    "Results",
    "ResultsFileError",
    "ResumeMismatchError",
    "RewardStats",
    "RayExecutor",
    "RunConfig",
    "RunError",
    "RunReport",
    "read_results",
    "run_environment",
]
