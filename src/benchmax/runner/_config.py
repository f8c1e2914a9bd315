"""``RunConfig``: everything that defines and tunes one local run."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax._hook_deadlines import HookDeadlines
from benchmax._sampling_args import validated_sampling_args
from benchmax._secret_masking import (
    MIN_MASKED_LENGTH,
    credential_secrets,
    mask_secrets,
    remember,
    url_passwords,
)
from benchmax._url_credentials import masked_url, repr_masking_urls
from benchmax._value_checks import check_non_empty_str, is_finite_number, is_int_at_least
from benchmax.auth import ModelAuth, ModelRequestContext
from benchmax.envs.shared_types import DatasetSplit

__all__ = [
    "MIN_MASKED_LENGTH",
    "ROLLOUT_ID_PLACEHOLDER",
    "NoModelAuth",
    "RunConfig",
    "credential_secrets",
    "mask_secrets",
    "rollout_seed",
]

ROLLOUT_ID_PLACEHOLDER = "{rollout_id}"
"""Written in ``RunConfig.base_url``, it is replaced by each rollout's id (per-rollout sessions)."""


@dataclass(frozen=True, slots=True)
class NoModelAuth:
    """Sends no credential (for local servers such as vLLM or Ollama without a key)."""

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """One local run: which examples, which model endpoint, how many rollouts, where results go.

    ``base_url`` may contain ``{rollout_id}`` to give every rollout its own endpoint root.
    ``auth_providers`` are bound with ``bind_model_auth`` for the run (names used by
    ``InjectedAuth`` inside the environment, e.g. a judge). ``sampling_args`` are extra
    chat-completions body fields (``temperature``, ``max_tokens``, ``top_p``, ``seed``,
    server-specific ones such as ``top_k``) put into every ``RolloutRequest``; they override
    the environment's and may not set ``model``, ``messages`` or ``tools``. ``output`` is
    the results JSONL file (``None``: no file; ``run_environment(on_group=...)`` hands
    each group's trajectories to the caller); an existing file is resumed.
    ``tokens`` asks every rollout to record the exact tokens of its model calls
    (``RolloutRequest.record_tokens``); the run then starts with one preflight model call
    and stops with ``RunError`` when the server's reply lacks token data.

    The results header records the run definition: the environment's class path with
    ``constructor_args`` (the keyword arguments the environment was built with: the runner
    cannot see them, so pass them to have a resume with other arguments refused), a digest
    of its source, its limits, the sampling args, split, model, base URL, group size and
    ``max_examples``. ``env_definition`` replaces the class path and arguments (e.g.
    ``{"bundle_digest": ...}`` for an environment loaded from a bundle; no source digest is
    then taken), ``definition_extras`` adds fields, and ``recorded_base_url`` replaces
    ``base_url`` there when the real URL is not stable across runs (a mock server's port).

    ``seed`` (the run seed) gives every rollout its own sampling seed,
    ``rollout_seed(seed, example_id, group_index)``, sent as the request's ``seed``; the
    same run seed sends the same seeds on resume. A ``seed`` in ``sampling_args`` is sent
    unchanged with every request instead (one fixed seed); setting both is a ``ValueError``.
    Fail-fast checks (``beyond.md`` §9, none recorded in the header): with ``judge_check``
    (default on) every distinct judge reachable from the environment, plus ``judges``, is
    reached once with its credential before the run, and a refusal (401/403) or no answer
    stops it (``JudgeCheckError``); ``max_failure_share`` (0 to 1, default 0.8) stops the
    run (``FailureShareExceeded``) once at least 20 rollouts ran and more than that share
    of them ended with one same failure (1 never stops).

    ``retry_failed`` (what ``benchmax run --retry-failed`` sets) also runs again every
    resumed group whose latest attempt has a rollout that failed operationally
    (``model_error``, the timeouts, ``setup_error``...; not the scoring failures
    ``reward_error``, ``reward_timeout``, ``judge_error``, ``group_reward_error``, which
    ``rescore_results`` scores again): under the next attempt number, the old attempt's lines
    kept in the file; readers take each example's highest complete attempt.

    ``hook_deadlines`` bound the hooks the environment leaves unbounded (``compute_reward``
    without ``reward_timeout``, tools without ``tool_timeout``, ``rollout_context``,
    ``user_turn``, ``compute_group_rewards``, judges without a ``timeout``): by default
    15 minutes each, after which the rollout settles with the matching reason and the log
    names the hook, the line it waited at and the rollout (``HookDeadlines.none()``: none).
    """

    model: str
    base_url: str
    model_auth: ModelAuth = field(default_factory=NoModelAuth, repr=False)
    auth_providers: Mapping[str, ModelAuth] = field(default_factory=dict, repr=False)
    split: DatasetSplit = "eval"
    base_dir: Path = Path(".")
    group_size: int = 4
    max_examples: int | None = None
    max_concurrent_groups: int = 8
    sampling_args: Mapping[str, Any] = field(default_factory=dict)
    output: Path | None = None
    force: bool = False
    constructor_args: Mapping[str, Any] = field(default_factory=dict, repr=False)
    env_definition: Mapping[str, Any] | None = None
    definition_extras: Mapping[str, Any] = field(default_factory=dict)
    recorded_base_url: str | None = None
    log_level: int = logging.WARNING
    seed: int | None = None
    tokens: bool = False
    judge_check: bool = True
    judges: tuple[Any, ...] = ()
    max_failure_share: float = 0.8
    retry_failed: bool = False
    hook_deadlines: HookDeadlines = field(default_factory=HookDeadlines)

    def __post_init__(self) -> None:
        check_non_empty_str(self.model, "model")
        check_non_empty_str(self.base_url, "base_url")
        if not isinstance(self.model_auth, ModelAuth):
            raise TypeError("model_auth must implement ModelAuth")
        if not isinstance(self.auth_providers, Mapping):
            raise TypeError("auth_providers must be a mapping of names to ModelAuth")
        if self.split not in ("train", "eval"):
            raise ValueError("split must be 'train' or 'eval'")
        if not is_int_at_least(self.group_size, 1):
            raise ValueError("group_size must be a positive integer")
        if self.max_examples is not None and not is_int_at_least(self.max_examples, 1):
            raise ValueError("max_examples must be a positive integer or None")
        if not is_int_at_least(self.max_concurrent_groups, 1):
            raise ValueError("max_concurrent_groups must be a positive integer")
        object.__setattr__(
            self, "sampling_args", validated_sampling_args(self.sampling_args, "sampling_args")
        )
        if not isinstance(self.constructor_args, Mapping):
            raise TypeError("constructor_args must be a mapping of argument names to values")
        object.__setattr__(self, "constructor_args", dict(self.constructor_args))
        object.__setattr__(self, "base_dir", Path(self.base_dir))
        if self.output is not None:
            object.__setattr__(self, "output", Path(self.output))
        if isinstance(self.log_level, bool) or not isinstance(self.log_level, int):
            raise ValueError("log_level must be a logging level number")
        if self.seed is not None:
            if isinstance(self.seed, bool) or not isinstance(self.seed, int):
                raise ValueError("seed must be an integer or None")
            if "seed" in self.sampling_args:
                raise ValueError(
                    "set either seed (one seed per rollout, derived from it) or "
                    "sampling_args['seed'] (the same seed for every rollout), not both"
                )
        if not isinstance(self.tokens, bool):
            raise TypeError("tokens must be True or False")
        if not isinstance(self.judge_check, bool):
            raise TypeError("judge_check must be True or False")
        if not isinstance(self.retry_failed, bool):
            raise TypeError("retry_failed must be True or False")
        object.__setattr__(self, "judges", tuple(self.judges))
        if not isinstance(self.hook_deadlines, HookDeadlines):
            raise TypeError("hook_deadlines must be a HookDeadlines")
        share = self.max_failure_share
        if not (is_finite_number(share) and 0 <= share <= 1):
            raise ValueError("max_failure_share must be a number from 0 to 1")

    def sampling_args_for(self, example_id: str, group_index: int) -> Mapping[str, Any]:
        """The sampling args of one rollout's request: ``sampling_args``, plus its own
        ``seed`` when the run has a ``seed``."""
        if self.seed is None:
            return self.sampling_args
        return {**self.sampling_args, "seed": rollout_seed(self.seed, example_id, group_index)}

    def __repr__(self) -> str:
        return repr_masking_urls(self, "base_url")  # a password in the URL: user:***@

    def base_url_for(self, rollout_id: str) -> str:
        """The endpoint root for one rollout."""
        return self.base_url.replace(ROLLOUT_ID_PLACEHOLDER, rollout_id)

    @property
    def public_base_url(self) -> str:
        """The URL the results header records: ``recorded_base_url``, else ``base_url``
        with any password in it (``https://user:PASSWORD@host/v1``) masked."""
        if self.recorded_base_url is not None:
            return self.recorded_base_url
        return masked_url(self.base_url)

    def secrets(self) -> tuple[str, ...]:
        """Bearer tokens, a password in ``base_url`` and the passwords of URLs among the
        ``constructor_args`` (an MCP server's ``url`` given with ``--env-arg``) this config
        carries, so the runner can mask them in what it records and prints."""
        found = credential_secrets([self.model_auth, *self.auth_providers.values()], self.base_url)
        extra = tuple(s for s in url_passwords(self.constructor_args) if s not in found)
        remember(*extra)
        return found + extra


def rollout_seed(run_seed: int, example_id: str, group_index: int) -> int:
    """The sampling seed of one rollout: distinct per rollout, the same on every run.

    The first 4 bytes of ``sha256(f"{run_seed}:{example_id}:{group_index}")`` as a
    big-endian integer, shifted right by one bit: an integer in ``[0, 2**31)`` (every
    server's seed type holds it). It depends on the run seed, the example id and the
    rollout's index in its group only (never on the run id or the attempt), so a resumed
    run sends the same seeds for the same group.
    """
    text = f"{run_seed}:{example_id}:{group_index}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big") >> 1
