"""The failure-share stop: a run whose rollouts keep failing the same way stops early.

A misconfigured run (reward keys the environment does not declare, a refused credential,
a judge that always fails, a tool that always raises) otherwise trains on zeros to the
end and exits 0. After at least :data:`MIN_ROLLOUTS` rollouts of this invocation, when
the share of them that ended with one same failure exceeds ``max_failure_share``, the
run stops with one short line naming the termination reason and the share, then the
detail (one example, and what to do: a scoring failure points to ``benchmax rescore``, any
other to ``benchmax run --retry-failed``); the groups finished so far stay in the results
file (the run resumes).

"The same failure" is a failure reason (any termination reason but ``finished`` and the
budget limits ``max_turns_exceeded``, ``tool_budget_exceeded``, ``output_exceeded``,
``context_exceeded``, ``content_filter``) together with the text of the rollout's first
error log line, with rollout ids and numbers blanked (so "rollout r3 failed after 2.1s"
and "rollout r7 failed after 1.9s" are the same failure). ``max_failure_share`` 1 never
stops (a share cannot exceed 1); 0 stops at the first failure once the minimum is run.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

from benchmax._tracebacks import failure_summary
from benchmax._vocabulary import (
    CONTENT_FILTER,
    CONTEXT_EXCEEDED,
    FINISHED,
    MAX_TURNS_EXCEEDED,
    OUTPUT_EXCEEDED,
    SCORING_FAILURES,
    TOOL_BUDGET_EXCEEDED,
)
from benchmax.results import RunError
from benchmax.trajectory import Trajectory

__all__ = [
    "DEFAULT_MAX_FAILURE_SHARE",
    "MIN_ROLLOUTS",
    "FailureShareExceeded",
    "FailureTally",
    "is_failure",
    "is_retryable_failure",
]

DEFAULT_MAX_FAILURE_SHARE: Final = 0.8
"""The default ``max_failure_share``."""

MIN_ROLLOUTS: Final = 20
"""Rollouts this invocation runs before the failure share is judged."""

NOT_FAILURES: Final = frozenset(
    {
        FINISHED,
        MAX_TURNS_EXCEEDED,
        TOOL_BUDGET_EXCEEDED,
        OUTPUT_EXCEEDED,
        CONTEXT_EXCEEDED,
        CONTENT_FILTER,
    }
)
"""Termination reasons that are outcomes of the task, not failures of the run."""

_BLANKED = re.compile(r"\b[\w.-]*\.r\d+\b|\d+(?:\.\d+)?")
_EXAMPLE_LIMIT = 300


def is_failure(termination_reason: str) -> bool:
    """Whether a termination reason is a failure (see the module docs)."""
    return termination_reason not in NOT_FAILURES


def is_retryable_failure(termination_reason: str) -> bool:
    """Whether running the group again is the fix for a rollout that ended so: a failure
    (``is_failure``) that is not a failure of scoring (``reward_error``, ``reward_timeout``,
    ``judge_error``, ``group_reward_error``: ``benchmax rescore`` scores those again from
    the stored transcripts, without calling the model)."""
    return is_failure(termination_reason) and termination_reason not in SCORING_FAILURES


class FailureShareExceeded(RunError):
    """Most rollouts ended with the same failure: the run stopped early.

    ``str()`` is one short line; ``detail`` holds the lines that follow it (an example
    rollout, what to do next), also added as notes so a traceback shows them."""

    def __init__(self, summary: str, detail: tuple[str, ...] = ()) -> None:
        super().__init__(summary)
        self.summary = summary
        self.detail = tuple(detail)
        for line in self.detail:
            self.add_note(line)

    def __reduce__(self) -> tuple[type[FailureShareExceeded], tuple[str, tuple[str, ...]]]:
        return (type(self), (self.summary, self.detail))


class FailureTally:
    """Counts this invocation's rollouts by failure; says when the share is exceeded."""

    def __init__(self, max_share: float, min_rollouts: int = MIN_ROLLOUTS) -> None:
        self.max_share = max_share
        self.min_rollouts = min_rollouts
        self.rollouts = 0
        self._failures: Counter[tuple[str, str]] = Counter()
        self._examples: dict[tuple[str, str], str] = {}

    def add(self, trajectories: Iterable[Trajectory]) -> None:
        """Count one finished group's rollouts."""
        for trajectory in trajectories:
            self.rollouts += 1
            reason = trajectory.termination_reason
            if not is_failure(reason):
                continue
            text = _first_error(trajectory.logs)
            key = (reason, _BLANKED.sub("#", text))
            self._failures[key] += 1
            self._examples.setdefault(key, f"rollout {trajectory.rollout_id}: {text}")

    def exceeded(self) -> FailureShareExceeded | None:
        """The error to stop with, or ``None`` while the run may go on."""
        if self.max_share >= 1 or self.rollouts < self.min_rollouts or not self._failures:
            return None
        key, count = self._failures.most_common(1)[0]
        share = count / self.rollouts
        if share <= self.max_share:
            return None
        example = self._examples[key]
        if len(example) > _EXAMPLE_LIMIT:
            example = example[: _EXAMPLE_LIMIT - 3] + "..."
        reason = key[0]
        if reason in SCORING_FAILURES:
            remedy = (
                "the rollouts ran but their scoring failed: fix the reward code, then"
                " 'benchmax rescore RESULTS' scores the saved transcripts again (no model calls)"
            )
        else:
            remedy = (
                "fix the cause (a configuration problem?), then run the same command with"
                " --retry-failed to run the failed groups again"
            )
        return FailureShareExceeded(
            f"stopped early: {count} of {self.rollouts} rollouts ({share:.0%}) ended {reason}",
            (
                f"e.g. {example}",
                remedy,
                f"the finished groups are kept (run again to resume); more than"
                f" --max-failure-share {self.max_share:g} of the rollouts failed the same way;"
                " --max-failure-share 1 (RunConfig(max_failure_share=1)) turns this stop off",
            ),
        )


def _first_error(logs: object) -> str:
    """The ERROR (or worse) log line that settled the rollout (its message names the
    ``termination_reason``), else its first one: its exception's ``failure_summary`` (the
    ``Type: message`` line, the hook and the user's file:line) when it has one, else its
    message; one line, else ``""``."""
    if not isinstance(logs, list | tuple):
        return ""
    errors = [
        entry
        for entry in logs
        if isinstance(entry, Mapping) and entry.get("level") in ("ERROR", "CRITICAL")
    ]
    settling = [e for e in errors if "termination_reason=" in str(e.get("message", ""))]
    for entry in (settling or errors)[:1]:
        exception = failure_summary(str(entry.get("exception") or ""))
        return " ".join((exception or str(entry.get("message", ""))).split())
    return ""
