"""``HarborEnv``: one Harbor trial per rollout, with normalized verifier rewards."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from benchmax._value_checks import is_int_at_least
from benchmax.auth import ModelRequestContext
from benchmax.capture import CaptureAddress
from benchmax.envs.environment import Environment
from benchmax.envs.harbor._capture import AgentEndpoint, captured_trial
from benchmax.envs.harbor._env_config import (
    check_credentials_type,
    check_job_queue_settings,
    check_max_concurrent_trials,
    check_sandbox_credentials,
    check_trial,
    normalize_reward_keys,
    with_provider_defaults,
)
from benchmax.envs.harbor._loop_local import LoopLocal
from benchmax.envs.harbor._rewardkit import criteria_credit
from benchmax.envs.harbor.bundled_agent import BundledHarborAgent
from benchmax.envs.harbor.credentials import SandboxCredentials, sandbox_credentials_scope
from benchmax.envs.harbor.dataset import HarborDataset, check_eval_ratio
from benchmax.envs.harbor.dep_check import require_harbor
from benchmax.envs.harbor.types import HarborTrialTemplate
from benchmax.envs.shared_types import (
    CONTEXT_EXCEEDED,
    FINISHED,
    HARNESS_ERROR,
    HARNESS_TIMEOUT,
    OUTPUT_EXCEEDED,
    SANDBOX_ERROR,
    VERIFIER_ERROR,
    VERIFIER_TIMEOUT,
    DatasetSplit,
    RolloutAttempt,
    RolloutOutcome,
    RolloutRequest,
    TerminationReason,
)

if TYPE_CHECKING:
    from harbor.models.job.config import DatasetConfig
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig

__all__ = ["HarborEnv"]

logger = logging.getLogger(__name__)

_ROLLOUT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_BEARER = "Bearer "
_TERMINATION_BY_EXCEPTION: Final[Mapping[str, TerminationReason]] = {
    "AgentTimeoutError": HARNESS_TIMEOUT,
    "ContextLengthExceededError": CONTEXT_EXCEEDED,
    "ContextWindowExceededError": CONTEXT_EXCEEDED,
    "NonZeroAgentExitCodeError": HARNESS_ERROR,
    "OutputLengthExceededError": OUTPUT_EXCEEDED,
    "SandboxBuildFailedError": SANDBOX_ERROR,
    "VerifierTimeoutError": VERIFIER_TIMEOUT,
}


def _termination_reason(exception_type: str) -> TerminationReason:
    return _TERMINATION_BY_EXCEPTION.get(exception_type, HARNESS_ERROR)


class HarborEnv(Environment["TaskConfig", RolloutAttempt]):
    """Runs each rollout as one Harbor trial configured by native Harbor configs.

    Harbor owns the harness loop inside the sandbox; this adapter maps a rollout
    request to a trial (routing the agent to the requested model) and turns the
    trial's verifier result into declared rewards or a zero-reward outcome.

    With ``capture_calls=True`` the agent's model calls go through a capture endpoint and
    become the rollout's ``model_calls`` with token ids. The endpoint listens on
    ``capture_bind`` (default ``127.0.0.1``) and the agent's ``OPENAI_BASE_URL`` names
    ``capture_host`` (default: ``capture_bind``): for a Docker sandbox, e.g.
    ``capture_bind="172.17.0.1", capture_host="172.17.0.1"`` (the bridge gateway) or
    ``capture_bind="0.0.0.0", capture_host="host.docker.internal"``. Beyond loopback the
    endpoint is reachable from the network; each rollout's random key guards it
    (docs/agents.md). ``ValueError`` for an address that is not one, a wildcard bind
    without ``capture_host``, or either set without ``capture_calls``.
    """

    def __init__(
        self,
        *,
        dataset: DatasetConfig,
        trial: HarborTrialTemplate,
        reward_keys: Sequence[str],
        sandbox_credentials: SandboxCredentials | None = None,
        eval_dataset: DatasetConfig | None = None,
        eval_ratio: float = 0.1,
        max_concurrent_trials: int | None = None,
        requires_public_model_endpoint: bool = True,
        capture_calls: bool = False,
        capture_bind: str | None = None,
        capture_host: str | None = None,
    ) -> None:
        require_harbor()
        from harbor.models.job.config import DatasetConfig

        if not isinstance(dataset, DatasetConfig):
            raise TypeError(f"dataset must be Harbor DatasetConfig, got {type(dataset).__name__}")
        if eval_dataset is not None and not isinstance(eval_dataset, DatasetConfig):
            raise TypeError(
                "eval_dataset must be Harbor DatasetConfig when provided, "
                f"got {type(eval_dataset).__name__}"
            )
        agent_config = check_trial(trial)
        ratio = check_eval_ratio(eval_ratio)
        check_credentials_type(sandbox_credentials)
        trial_cap = check_max_concurrent_trials(max_concurrent_trials)
        check_job_queue_settings(agent_config)
        check_sandbox_credentials(trial.environment, sandbox_credentials)
        keys = normalize_reward_keys(reward_keys)
        if not isinstance(capture_calls, bool):
            raise TypeError("capture_calls must be True or False")
        if not capture_calls and (capture_bind is not None or capture_host is not None):
            raise ValueError("capture_bind and capture_host apply only with capture_calls=True")
        address = CaptureAddress(
            bind="127.0.0.1" if capture_bind is None else capture_bind, host=capture_host
        )

        self._dataset = dataset.model_copy(deep=True)
        self._eval_dataset = None if eval_dataset is None else eval_dataset.model_copy(deep=True)
        self._eval_ratio = ratio
        self._trial = with_provider_defaults(trial)
        self._reward_keys = keys
        self._sandbox_credentials = sandbox_credentials
        self._requires_public_model_endpoint = requires_public_model_endpoint
        self._capture_calls = capture_calls
        self._capture_address = address
        self._trial_slots = (
            None
            if trial_cap is None
            else LoopLocal(functools.partial(asyncio.Semaphore, trial_cap))
        )
        self._datasets: dict[Path, HarborDataset] = {}
        self._datasets_lock = LoopLocal(asyncio.Lock)

    @property
    def reward_keys(self) -> Sequence[str]:
        """The declared verifier reward keys, in order."""
        return self._reward_keys

    @property
    def requires_public_model_endpoint(self) -> bool:
        """Whether sandboxed agents need a publicly reachable model URL."""
        return self._requires_public_model_endpoint

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> HarborDataset:
        """Resolve and snapshot the split's tasks under ``base_dir`` (cached per directory).

        With ``max_examples`` set, returns the first that many examples of the split
        in dataset order (ascending id). The whole dataset is still resolved, since
        the split and the order depend on every task's content hash.

        Raises:
            ValueError: unknown ``split``, ``max_examples`` not a positive ``int`` or
                ``None``, or an empty automatic eval split.
        """
        if split not in ("train", "eval"):
            raise ValueError(f"unknown dataset split: {split!r}")
        if max_examples is not None and not is_int_at_least(max_examples, 1):
            raise ValueError("max_examples must be a positive integer or None")
        dataset = await self._split(split, Path(base_dir))
        if max_examples is None or len(dataset) <= max_examples:
            return dataset
        return HarborDataset(itertools.islice(dataset, max_examples))

    async def _split(self, split: DatasetSplit, base_dir: Path) -> HarborDataset:
        if self._eval_dataset is not None:
            if split == "train":
                return await self._resolve(self._dataset, base_dir / "train")
            return await self._resolve(self._eval_dataset, base_dir / "eval")
        resolved = await self._resolve(self._dataset, base_dir / "main")
        train, evaluation = resolved.train_eval_split(self._eval_ratio)
        if split == "train":
            return train
        if not len(evaluation):
            if self._eval_ratio == 0:
                raise ValueError("HarborEnv automatic eval is disabled by eval_ratio=0")
            raise ValueError("HarborEnv automatic eval requires at least two dataset examples")
        return evaluation

    async def _resolve(self, config: DatasetConfig, snapshot_dir: Path) -> HarborDataset:
        key = snapshot_dir.expanduser().resolve()
        async with self._datasets_lock.get():
            cached = self._datasets.get(key)
            if cached is None:
                cached = await HarborDataset.create(
                    config,
                    base_dir=key,
                    disable_verification=self._trial.verifier.disable,
                )
                self._datasets[key] = cached
            return cached

    async def run_group(
        self, requests: Sequence[RolloutRequest[TaskConfig]]
    ) -> Mapping[str, RolloutOutcome]:
        """Run the group with the sandbox credentials exposed for all its rollouts."""
        async with sandbox_credentials_scope(self._sandbox_credentials):
            return await super().run_group(requests)

    async def run_rollout(self, request: RolloutRequest[TaskConfig]) -> RolloutAttempt:
        """Run one Harbor trial, holding a trial slot when ``max_concurrent_trials`` is set."""
        if self._trial_slots is None:
            return await self._run_in_scope(request)
        async with self._trial_slots.get():
            return await self._run_in_scope(request)

    async def aclose(self) -> None:
        """Nothing to release: each Harbor trial owns and closes its own sandbox."""

    async def _run_in_scope(self, request: RolloutRequest[TaskConfig]) -> RolloutAttempt:
        async with sandbox_credentials_scope(self._sandbox_credentials):
            if not self._capture_calls:
                return await self._run_trial(request)
            return await captured_trial(
                request, self._run_trial, self._reward_keys, self._capture_address
            )

    async def _run_trial(
        self, request: RolloutRequest[TaskConfig], agent_endpoint: AgentEndpoint | None = None
    ) -> RolloutAttempt:
        from harbor.models.trial.config import TaskConfig
        from harbor.trial.trial import Trial

        payload = request.example.payload
        if not isinstance(payload, TaskConfig):
            raise TypeError(
                f"HarborEnv rollout payload must be Harbor TaskConfig, got {type(payload).__name__}"
            )
        rollout_id = request.rollout_id
        if not _ROLLOUT_ID.fullmatch(rollout_id):
            raise ValueError(
                "Harbor rollout_id must contain only letters, numbers, '.', '_', and '-', "
                "and must start with a letter or number"
            )
        trial_config = await self._trial_config(request, payload, agent_endpoint)
        logger.info(
            "harbor.rollout.start rollout_id=%s task=%s sandbox=%s harness=%s model=%s",
            rollout_id,
            request.example.id,
            _sandbox_label(trial_config),
            trial_config.agent.name or trial_config.agent.import_path,
            trial_config.agent.model_name,
        )
        try:
            trial = await Trial.create(trial_config)
            result = await trial.run()
        except Exception as error:
            logger.exception(
                "harbor.rollout.failed rollout_id=%s task=%s", rollout_id, request.example.id
            )
            attempt = self._zero_attempt(rollout_id, _termination_reason(type(error).__name__))
        else:
            trial_dir = Path(trial_config.trials_dir) / rollout_id
            attempt = self._normalize(rollout_id, result, trial_dir)
        logger.info(
            "harbor.rollout.done rollout_id=%s termination_reason=%s rewards=%s",
            rollout_id,
            attempt.termination_reason,
            dict(attempt.rewards or {}),
        )
        return attempt

    async def _trial_config(
        self,
        request: RolloutRequest[TaskConfig],
        payload: TaskConfig,
        agent_endpoint: AgentEndpoint | None = None,
    ) -> TrialConfig:
        from harbor.models.trial.config import TrialConfig

        template = self._trial
        agent = template.agent
        prepared: AgentConfig = (
            agent._harbor_config() if isinstance(agent, BundledHarborAgent) else agent
        )
        if agent_endpoint is not None:  # captured: the agent gets its session's URL and key
            key, base_url = agent_endpoint.api_key, agent_endpoint.base_url
        else:
            headers = await request.model_auth.headers_for_request(
                ModelRequestContext(
                    base_url=request.base_url, model=request.model, rollout_id=request.rollout_id
                )
            )
            authorization = headers.get("Authorization", "")
            if not isinstance(authorization, str) or not authorization.startswith(_BEARER):
                raise ValueError("Harbor model auth must provide a Bearer token")
            key, base_url = authorization[len(_BEARER) :], request.base_url
        agent_env = {
            **prepared.env,
            "OPENAI_API_KEY": key,
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_BASE": base_url,
        }
        model = request.model
        model_name = model if model.startswith("openai/") else f"openai/{model}"
        agent_config = prepared.model_copy(
            deep=True, update={"model_name": model_name, "env": agent_env}
        )
        return TrialConfig(
            task=payload.model_copy(deep=True),
            trial_name=request.rollout_id,
            trials_dir=template.trials_dir,
            timeout_multiplier=template.timeout_multiplier,
            agent_timeout_multiplier=template.agent_timeout_multiplier,
            verifier_timeout_multiplier=template.verifier_timeout_multiplier,
            agent_setup_timeout_multiplier=template.agent_setup_timeout_multiplier,
            environment_build_timeout_multiplier=template.environment_build_timeout_multiplier,
            agent=agent_config,
            environment=template.environment.model_copy(deep=True),
            verifier=template.verifier.model_copy(deep=True),
            artifacts=list(template.artifacts),
            extra_instruction_paths=list(template.extra_instruction_paths),
        )

    def _zero_attempt(self, rollout_id: str, reason: TerminationReason) -> RolloutAttempt:
        return RolloutAttempt(
            rollout_id=rollout_id,
            termination_reason=reason,
            rewards=dict.fromkeys(self._reward_keys, 0.0),
        )

    def _normalize(self, rollout_id: str, result: Any, trial_dir: Path) -> RolloutAttempt:
        verifier_result = result.verifier_result
        rewards = None if verifier_result is None else verifier_result.rewards
        exception_info = result.exception_info
        if not rewards:
            if exception_info is None:
                detail = "the verifier returned no rewards"
                reason: TerminationReason = VERIFIER_ERROR
            else:
                detail = f"{exception_info.exception_type}: {exception_info.exception_message}"
                reason = _termination_reason(exception_info.exception_type)
            logger.error("harbor.rollout.zero_reward rollout_id=%s error=%s", rollout_id, detail)
            return self._zero_attempt(rollout_id, reason)
        if exception_info is not None:
            logger.error(
                "harbor.rollout.zero_reward rollout_id=%s error=%s: %s",
                rollout_id,
                exception_info.exception_type,
                exception_info.exception_message,
            )
            return self._zero_attempt(
                rollout_id, _termination_reason(exception_info.exception_type)
            )
        normalized = {str(key): float(value) for key, value in rewards.items()}
        if "partial_credit" in self._reward_keys and "partial_credit" not in normalized:
            credit = _rewardkit_credit(trial_dir) if "reward" in normalized else None
            normalized["partial_credit"] = 0.0 if credit is None else credit
        return RolloutAttempt(
            rollout_id=rollout_id, termination_reason=FINISHED, rewards=normalized
        )


def _sandbox_label(trial_config: TrialConfig) -> str:
    environment = trial_config.environment
    import_path: str | None = environment.import_path
    if import_path is not None:
        return import_path
    if environment.type is not None:
        return str(environment.type.value)
    return "unknown"


def _rewardkit_credit(trial_dir: Path) -> float | None:
    path = trial_dir / "verifier" / "reward-details.json"
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("harbor.rewardkit.invalid_details path=%s", path, exc_info=True)
        return None
    return criteria_credit(document)
