"""The words every layer shares: termination reasons and token-usage keys, named once.

A leaf module (it imports nothing from benchmax), so ``_modelhttp``, the environments,
the rollout record, the runner and the training helpers all use the same names and a
typo is a type error. ``benchmax.envs.shared_types`` re-exports the reasons (the 0.2
contract names them there).

Termination reasons are open-ended strings; the ones this library and its adapters
produce are the ``Final`` constants below and the :data:`TerminationReason` literal
type that lists them. :data:`TRAINABLE_REASONS` says which of them a trainer should
learn from (see ``benchmax.training``).
"""

from __future__ import annotations

from typing import Final, Literal, TypedDict

__all__ = [
    "CONTENT_FILTER",
    "CONTEXT_EXCEEDED",
    "FINISHED",
    "GROUP_REWARD_ERROR",
    "HARNESS_ERROR",
    "HARNESS_TIMEOUT",
    "JUDGE_ERROR",
    "LEFTOVER_PROCESS",
    "MAX_TURNS_EXCEEDED",
    "MODEL_ERROR",
    "MODEL_RETRY_EVENT",
    "MODEL_TIMEOUT",
    "NO_MODEL_CALL",
    "OUTPUT_EXCEEDED",
    "REWARD_ERROR",
    "REWARD_TIMEOUT",
    "ROLLOUT_TIMEOUT",
    "SANDBOX_ERROR",
    "SCORING_FAILURES",
    "SETUP_ERROR",
    "SIMULATED_USER_ERROR",
    "STDOUT_EXCEEDED",
    "TOKEN_USAGE_KEYS",
    "TOOL_BUDGET_EXCEEDED",
    "TOOL_ERROR",
    "TOOL_TIMEOUT",
    "TRAINABLE_REASONS",
    "UNKNOWN",
    "VERIFIER_ERROR",
    "VERIFIER_TIMEOUT",
    "WRONG_MODEL",
    "TerminationReason",
    "TokenUsage",
]

TerminationReason = Literal[
    "finished",
    "max_turns_exceeded",
    "tool_budget_exceeded",
    "output_exceeded",
    "context_exceeded",
    "content_filter",
    "model_error",
    "model_timeout",
    "tool_error",
    "tool_timeout",
    "rollout_timeout",
    "reward_error",
    "reward_timeout",
    "group_reward_error",
    "judge_error",
    "setup_error",
    "simulated_user_error",
    "harness_error",
    "harness_timeout",
    "sandbox_error",
    "verifier_error",
    "verifier_timeout",
    "no_model_call",
    "wrong_model",
    "stdout_exceeded",
    "leftover_process",
    "unknown",
]
"""The built-in termination reasons; any other non-empty string is also valid.

A model's unrecognized ``finish_reason`` may be passed through verbatim.
"""

# The one success value: the rollout ended normally and was scored.
FINISHED: Final = "finished"
# BaseEnv's chat/tool loop hit a limit.
MAX_TURNS_EXCEEDED: Final = "max_turns_exceeded"
TOOL_BUDGET_EXCEEDED: Final = "tool_budget_exceeded"
OUTPUT_EXCEEDED: Final = "output_exceeded"
CONTEXT_EXCEEDED: Final = "context_exceeded"
CONTENT_FILTER: Final = "content_filter"
# An operational failure or a deadline of one step.
MODEL_ERROR: Final = "model_error"
MODEL_TIMEOUT: Final = "model_timeout"
TOOL_ERROR: Final = "tool_error"
TOOL_TIMEOUT: Final = "tool_timeout"
ROLLOUT_TIMEOUT: Final = "rollout_timeout"
REWARD_ERROR: Final = "reward_error"
REWARD_TIMEOUT: Final = "reward_timeout"
GROUP_REWARD_ERROR: Final = "group_reward_error"
JUDGE_ERROR: Final = "judge_error"
# BaseEnv.rollout_context could not be entered (a sandbox service refusing, ...).
SETUP_ERROR: Final = "setup_error"
# BaseEnv.user_turn (a simulated user, e.g. benchmax.tools.SimulatedUser) failed: its
# endpoint refused or timed out, or the hook raised.
SIMULATED_USER_ERROR: Final = "simulated_user_error"
# Harbor trials: the agent harness, the sandbox and the verifier.
HARNESS_ERROR: Final = "harness_error"
HARNESS_TIMEOUT: Final = "harness_timeout"
SANDBOX_ERROR: Final = "sandbox_error"
VERIFIER_ERROR: Final = "verifier_error"
VERIFIER_TIMEOUT: Final = "verifier_timeout"
# AgentEnv programs (benchmax.agents): the program exited without calling the model; it
# called a model name other than the rollout's; it wrote more to stdout than allowed; a
# process it started was still running when it exited (all killed). A crash is
# harness_error, a hang rollout_timeout, a spent budget max_turns_exceeded/output_exceeded.
NO_MODEL_CALL: Final = "no_model_call"
WRONG_MODEL: Final = "wrong_model"
STDOUT_EXCEEDED: Final = "stdout_exceeded"
LEFTOVER_PROCESS: Final = "leftover_process"
UNKNOWN: Final = "unknown"

TRAINABLE_REASONS: Final = frozenset(
    {FINISHED, MAX_TURNS_EXCEEDED, TOOL_BUDGET_EXCEEDED, OUTPUT_EXCEEDED}
)
"""Reasons whose rewards judge what the model did, so a trainer may learn from them.

``finished`` was scored; the turn limit, the tool budget and the output limit were
reached by the model's own choices (their zero reward is a real signal). Every other
reason (``model_error``, the timeouts, ``context_exceeded``, ``content_filter``, reward,
judge, harness, sandbox and verifier failures, ``unknown`` and any reason an environment
invents through ``RolloutFailure``) is an operational failure: its zero reward says
nothing about the model, so the rollout is flagged non-trainable.
"""

SCORING_FAILURES: Final = frozenset({REWARD_ERROR, REWARD_TIMEOUT, JUDGE_ERROR, GROUP_REWARD_ERROR})
"""Failures of scoring: the rollout ran, its reward (or judge) failed. ``benchmax rescore``
scores such rollouts again from their stored transcripts, so ``run --retry-failed`` leaves
them alone; every other operational failure is retried by running the group again."""

MODEL_RETRY_EVENT: Final = "base.rollout.model_retry"
"""The event name that starts the WARNING logged before each retry of a model call (the
run report counts these in its rollouts' logs)."""

TOKEN_USAGE_KEYS: Final = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "reasoning_tokens",
    "cached_tokens",
)
"""The keys of :class:`TokenUsage`, in the order reports show them."""


class TokenUsage(TypedDict, total=False):
    """Tokens used, summed over model calls (one call's, or one rollout's).

    A field is present only when at least one call's reply reported it (never a
    made-up 0); ``reasoning_tokens`` comes from ``completion_tokens_details`` and
    ``cached_tokens`` from ``prompt_tokens_details``. A rollout whose replies reported
    no usage at all records ``usage: null``.
    """

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    reasoning_tokens: int
    cached_tokens: int
