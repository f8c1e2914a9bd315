"""The local runner: run an environment's examples as rollout groups against one endpoint.

``run_environment(env, RunConfig(...))`` runs a split through ``env.run_group``, appends
every completed group to a resumable JSONL results file and returns a ``RunReport``.
"""

from benchmax.runner._config import NoModelAuth, RunConfig
from benchmax.runner._errors import (
    GroupContractError,
    ResultsFileError,
    ResultsWriteError,
    ResumeMismatchError,
    RunError,
)
from benchmax.runner._metrics import PassAtK
from benchmax.runner._report import RewardStats, RunReport, UsageStats
from benchmax.runner._results import RESULTS_FORMAT, Results, read_results
from benchmax.runner._run import Progress, run_environment

__all__ = [
    "RESULTS_FORMAT",
    "GroupContractError",
    "NoModelAuth",
    "PassAtK",
    "Progress",
    "Results",
    "ResultsFileError",
    "ResultsWriteError",
    "ResumeMismatchError",
    "RewardStats",
    "RunConfig",
    "RunError",
    "RunReport",
    "UsageStats",
    "read_results",
    "run_environment",
]
