"""``run_environment``: run a split's examples as groups of rollouts against one endpoint."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from benchmax._group_pipeline import Group, GroupPipeline, Placement, run_pool
from benchmax._sampling_args import merged_sampling_args
from benchmax._vocabulary import MODEL_RETRY_EVENT
from benchmax.auth import _BOUND_MODEL_AUTH, bind_model_auth
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import Example, RolloutRequest
from benchmax.results import ResultsStore, RunError, RunReport, TrajectoryGroup, summarize
from benchmax.runner._config import RunConfig, mask_secrets
from benchmax.runner._definition import env_sampling_args, run_definition
from benchmax.runner._error_log import group_contract_error
from benchmax.runner._errors import GroupContractError
from benchmax.runner._failure_share import FailureTally, is_retryable_failure
from benchmax.runner._judge_check import check_judges, distinct_judges
from benchmax.runner._loop_watch import watching_the_loop
from benchmax.trajectory import LogEntry, Trajectory

__all__ = [
    "GroupCollector",
    "GroupDispatch",
    "GroupExecutor",
    "GroupJob",
    "Progress",
    "run_environment",
]


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a run stands, reported after the dataset loads and after every group."""

    examples_done: int
    examples_total: int
    rollouts_run: int
    elapsed_seconds: float
    first_reward_key: str | None
    first_reward_mean: float | None

    @property
    def rollouts_per_second(self) -> float:
        return self.rollouts_run / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0


async def _load_examples(env: Environment[Any, Any], config: RunConfig) -> list[Example[Any]]:
    """The split's examples (the first ``max_examples`` of them when set).

    A missing file propagates as ``FileNotFoundError``; any other failure to load becomes a
    ``RunError`` naming the split and directory, and so does a split with no examples (an
    empty file is a mistake, not a run whose report says nothing).
    """
    n = config.max_examples
    try:
        if n is not None and _accepts_max_examples(env.create_dataset):
            loading = env.create_dataset(config.split, config.base_dir, max_examples=n)
        else:
            loading = env.create_dataset(config.split, config.base_dir)
        if not inspect.isawaitable(loading):
            raise RunError(
                f"{type(env).__name__}.create_dataset is not async (it returned"
                f" {type(loading).__name__} instead of a coroutine): write it as"
                " 'async def create_dataset(...)'"
            )
        dataset = await loading
        examples = list(itertools.islice(dataset, n))
    except (FileNotFoundError, RunError):
        raise
    except (Exception, SystemExit) as error:  # sys.exit() in user code is its defect
        raise RunError(
            f"cannot load the {config.split} split from {config.base_dir}: "
            f"{type(error).__name__}: {error}{_noted(error)}"
        ) from error
    if not examples:
        raise RunError(
            f"the {config.split} split from {config.base_dir} has no examples: "
            f"{type(env).__name__}.create_dataset returned an empty dataset"
        )
    return examples


def _noted(error: BaseException) -> str:
    """`` (note; note)`` for the notes on ``error`` (e.g. ``while loading eval.jsonl:3``)."""
    notes = [str(note) for note in getattr(error, "__notes__", ())]
    return f" ({'; '.join(notes)})" if notes else ""


def _accepts_max_examples(method: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get("max_examples")
    if parameter is not None:
        return parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind is p.VAR_KEYWORD for p in parameters.values())


@dataclass(frozen=True, slots=True)
class GroupJob:
    """One group to run: an example, its index in the split and the attempt number.

    Rollout ids are ``<run_id>.e<index>.a<attempt>-<session>.r<k>``; a retried job
    (``retried()``) has the next attempt number and so new ids.
    """

    example_index: int
    example: Example[Any]
    attempt: int
    run_id: str
    session: str
    group_size: int

    @property
    def rollout_ids(self) -> tuple[str, ...]:
        prefix = f"{self.run_id}.e{self.example_index}.a{self.attempt}-{self.session}"
        return tuple(f"{prefix}.r{k}" for k in range(self.group_size))

    def retried(self) -> GroupJob:
        """The same group under the next attempt number (for a group whose worker was lost)."""
        return dataclasses.replace(self, attempt=self.attempt + 1)


class GroupDispatch(Protocol):
    """Runs groups for one run; ``capacity`` bounds the groups in flight."""

    capacity: int

    async def run(self, job: GroupJob) -> TrajectoryGroup: ...

    def failed_group_logs(self, example_index: int) -> list[LogEntry]:
        """What the group of ``example_index`` logged before it raised (for the error log)."""
        ...


class GroupExecutor(Protocol):
    """Where a run's groups execute: in this process (the default) or elsewhere (Ray).

    ``open`` prepares the workers for one run and yields the dispatch the runner sends
    every group through; leaving the block releases them (also on error or Ctrl-C).
    """

    def open(
        self, env: Environment[Any, Any], config: RunConfig, run_id: str
    ) -> AbstractAsyncContextManager[GroupDispatch]: ...


class _Run:
    """State of one invocation of ``run_environment``."""

    def __init__(
        self,
        env: Environment[Any, Any],
        config: RunConfig,
        store: ResultsStore,
        examples: Sequence[Example[Any]],
        resumed: Sequence[TrajectoryGroup],
        on_progress: Callable[[Progress], None] | None,
        on_group: Callable[[tuple[Trajectory, ...]], None] | None = None,
    ) -> None:
        self.env = env
        self.on_group = on_group
        self.config = config
        self.store = store
        self.examples = examples
        self.on_progress = on_progress
        self.session = os.urandom(2).hex()
        self.started = time.monotonic()
        self.rollouts_run = 0
        self.model_call_retries = 0
        self.first_key = _first_reward_key(env)
        self.first_sum = 0.0
        self.first_count = 0
        self.done = len(resumed)
        self.failures = FailureTally(config.max_failure_share)
        for group in resumed:
            self._tally(group)

    def _tally(self, group: TrajectoryGroup) -> None:
        for rewards in group.rewards:
            if self.first_key is None and rewards:
                self.first_key = next(iter(rewards))
            if self.first_key is not None and self.first_key in rewards:
                self.first_sum += float(rewards[self.first_key])
                self.first_count += 1

    def progress(self) -> None:
        if self.on_progress is None:
            return
        self.on_progress(
            Progress(
                examples_done=self.done,
                examples_total=len(self.examples),
                rollouts_run=self.rollouts_run,
                elapsed_seconds=time.monotonic() - self.started,
                first_reward_key=self.first_key,
                first_reward_mean=self.first_sum / self.first_count if self.first_count else None,
            )
        )

    async def run_pending(
        self, pending: list[tuple[int, Example[Any]]], dispatch: GroupDispatch
    ) -> None:
        def stopping(item: tuple[int, Example[Any]], error: Exception) -> BaseException:
            if isinstance(error, RunError):  # the runner's own failure (ExecutorError too)
                return error
            return self.contract_error(*item, error, dispatch)

        await run_pool(
            pending,
            lambda item: self.run_job(*item, dispatch),
            concurrency=dispatch.capacity,
            on_error=stopping,
        )

    def contract_error(
        self, index: int, example: Example[Any], error: Exception, dispatch: GroupDispatch
    ) -> GroupContractError:
        return group_contract_error(
            self.env,
            index,
            example.id,
            error,
            self.config.output,
            self.config.secrets(),
            logs=dispatch.failed_group_logs(index),
        )

    async def run_job(self, index: int, example: Example[Any], dispatch: GroupDispatch) -> None:
        job = GroupJob(
            example_index=index,
            example=example,
            attempt=self.store.next_attempt(index),
            run_id=self.store.run_id,
            session=self.session,
            group_size=self.config.group_size,
        )
        result = await dispatch.run(job)
        self.store.append(result)
        self.rollouts_run += len(result.trajectories)
        self.model_call_retries += sum(map(_model_call_retries, result.trajectories))
        self.done += 1
        self._tally(result)
        if self.on_group is not None:
            try:
                self.on_group(result.trajectories)
            except Exception as error:
                self.on_group = None  # stopping: groups still settling are not handed over
                done = "was saved" if self.store.path is not None else "ran (no results file)"
                raise RunError(
                    f"on_group raised {type(error).__name__}: {error} "
                    f"(after the group of example {example.id!r} {done})"
                ) from error
        self.progress()
        self.failures.add(result.trajectories)
        stop = self.failures.exceeded()
        if stop is not None:
            raise stop


class GroupCollector:
    """Makes a run's requests for a job and runs its group through the group pipeline.

    The local runner and every Ray worker use it, so both write the same lines: outcomes,
    what BaseEnv reports about each rollout, and the log records filed under each rollout
    (secrets masked). Enter ``pipeline.attached()`` around the groups of a run.
    """

    def __init__(self, env: Environment[Any, Any], config: RunConfig, run_id: str) -> None:
        self.env = env
        self.config = config
        self.run_id = run_id
        self.pipeline = GroupPipeline(
            env,
            auth_providers=_providers(config),
            secrets=config.secrets(),
            log_level=config.log_level,
            hook_deadlines=config.hook_deadlines,
        )

    def group(self, job: GroupJob) -> Group:
        """``job``'s requests, placed in this run."""
        config, example = self.config, job.example
        requests = tuple(
            RolloutRequest(
                rollout_id=rollout_id,
                example=example,
                model=config.model,
                base_url=config.base_url_for(rollout_id),
                model_auth=config.model_auth,
                split=config.split,
                sampling_args=config.sampling_args_for(example.id, k),
                record_tokens=config.tokens,
            )
            for k, rollout_id in enumerate(job.rollout_ids)
        )
        return Group(requests, Placement(self.run_id, job.example_index, job.attempt))

    async def collect(self, job: GroupJob) -> TrajectoryGroup:
        """Run ``job``'s group; a ``run_group`` contract error propagates (its records are
        then ``failed_logs(job)``)."""
        return await self.pipeline.run(self.group(job))

    def failed_logs(self, job: GroupJob) -> list[LogEntry]:
        """What ``job``'s group logged before it raised."""
        return self.pipeline.take_failed_logs(job.rollout_ids)


class _LocalDispatch:
    """Runs groups on this process's event loop."""

    def __init__(self, collector: GroupCollector, capacity: int) -> None:
        self.collector = collector
        self.capacity = capacity
        self.unsaved_logs: dict[int, list[LogEntry]] = {}

    async def run(self, job: GroupJob) -> TrajectoryGroup:
        try:
            return await self.collector.collect(job)
        except BaseException:
            self.unsaved_logs[job.example_index] = self.collector.failed_logs(job)
            raise

    def failed_group_logs(self, example_index: int) -> list[LogEntry]:
        return self.unsaved_logs.pop(example_index, [])


class _LocalExecutor:
    """The default executor: ``max_concurrent_groups`` groups at once in this process."""

    @contextlib.asynccontextmanager
    async def open(
        self, env: Environment[Any, Any], config: RunConfig, run_id: str
    ) -> AsyncIterator[GroupDispatch]:
        collector = GroupCollector(env, config, run_id)
        with collector.pipeline.attached():
            yield _LocalDispatch(collector, config.max_concurrent_groups)


def _model_call_retries(trajectory: Trajectory) -> int:
    """How many model calls of the rollout were retried after a transient failure (the
    WARNING records ``MODEL_RETRY_EVENT`` in its logs)."""
    return sum(
        1
        for entry in trajectory.logs
        if str(entry.get("message", "")).startswith(MODEL_RETRY_EVENT + " ")
    )


def needs_retry(group: TrajectoryGroup) -> bool:
    """Whether ``run_environment(retry_failed=True)`` runs ``group`` again: one of its
    rollouts failed operationally in a way a new attempt can fix (``is_retryable_failure``)."""
    return any(is_retryable_failure(t.termination_reason) for t in group.trajectories)


def _first_reward_key(env: Environment[Any, Any]) -> str | None:
    try:
        keys = env.reward_keys
        first = keys[0]
    except Exception:
        return None
    return first if isinstance(first, str) else None


async def _check_token_support(env: Environment[Any, Any], config: RunConfig) -> None:
    """The token preflight: one model call; ``RunError`` (one line) when it shows the
    server cannot return exact tokens."""
    from benchmax._modelhttp import token_preflight

    base_url = config.base_url_for("tokens-preflight")
    with bind_model_auth(_providers(config)):
        problem = await token_preflight(
            base_url=base_url,
            model=config.model,
            auth=config.model_auth,
            sampling_args=merged_sampling_args(env_sampling_args(env), config.sampling_args),
        )
    if problem is None:
        return
    shown = mask_secrets(base_url, config.secrets())
    said = mask_secrets(problem.message, config.secrets())
    if problem.call_failed:  # not a verdict on tokens: the model could not be reached
        raise RunError(f"tokens preflight: the call to {config.model} at {shown} failed: {said}")
    raise RunError(
        f"tokens preflight: {config.model} at {shown} cannot return exact tokens: {said}"
    )


def _providers(config: RunConfig) -> dict[str, Any]:
    outer: Mapping[str, Any] = _BOUND_MODEL_AUTH.get() or {}
    return {**outer, **config.auth_providers}


async def run_environment(
    env: Environment[Any, Any],
    config: RunConfig,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    executor: GroupExecutor | None = None,
    on_group: Callable[[tuple[Trajectory, ...]], None] | None = None,
) -> RunReport:
    """Run every example of ``config.split`` (or the first ``max_examples``) through ``env``.

    Each example becomes one group of ``group_size`` rollouts run by ``env.run_group``, at
    most ``max_concurrent_groups`` groups at once. Completed groups are appended to
    ``config.output`` as they finish; an existing results file is resumed (complete groups
    are skipped) unless its run definition differs, which raises ``ResumeMismatchError``
    unless ``config.force``; with ``config.retry_failed`` the resumed groups whose latest
    attempt failed operationally run again under the next attempt. A ``run_group``
    contract error stops scheduling new groups, lets the groups in flight finish, and
    raises ``GroupContractError``. The report is also written as JSON beside the results.

    Before the first group, each distinct judge the environment will call is reached once
    with its credential (``config.judge_check``; ``JudgeCheckError`` when one refuses it or
    cannot be reached), and the run stops early with ``FailureShareExceeded`` (the finished
    groups kept) when most rollouts keep failing the same way (``config.max_failure_share``).

    ``executor`` decides where groups run: by default in this process; a
    ``benchmax.runner.RayExecutor`` runs them on a Ray cluster while this process keeps
    the results file, progress and report. An ``ExecutorError`` (its workers cannot go on)
    stops the run.

    ``on_group`` receives the records (``benchmax.trajectory.Trajectory``, in group order:
    transcript, model calls, token data when recorded, outcome) of every group this
    invocation runs, as each completes and after it is saved; groups resumed from the file
    are not replayed (``benchmax.training.read_trajectories`` reads them). This is how a
    trainer gets trajectories with ``config.output=None``: nothing else keeps them, so
    memory stays at the groups in flight plus whatever the callback keeps. An exception
    from ``on_group`` stops the run as a ``RunError``; ``on_group`` is not called again
    (groups still settling are saved, not handed over).
    """
    started = time.monotonic()
    examples = await _load_examples(env, config)
    if config.tokens:
        await _check_token_support(env, config)
    if config.judge_check:
        judges = distinct_judges(env, config.judges)
        if judges:
            await check_judges(judges, _providers(config), config.secrets())
    definition = run_definition(env, config)
    store = ResultsStore.open(config.output, definition, force=config.force)
    try:
        pending: list[tuple[int, Example[Any]]] = []
        resumed: list[TrajectoryGroup] = []
        retried = 0
        for i, ex in enumerate(examples):
            if not store.is_complete(i, ex.id):
                pending.append((i, ex))
            elif config.retry_failed and needs_retry(store.groups[i]):
                pending.append((i, ex))
                retried += 1
            else:
                resumed.append(store.groups[i])
        run = _Run(env, config, store, examples, resumed, on_progress, on_group)
        run.progress()
        if pending:
            opened = (executor or _LocalExecutor()).open(env, config, store.run_id)
            async with watching_the_loop(), opened as dispatch:
                await run.run_pending(pending, dispatch)
    finally:
        store.close()
    report = summarize(
        run_id=store.run_id,
        results_path=config.output,
        examples=len(examples),
        groups=(store.groups[i] for i, ex in enumerate(examples) if store.is_complete(i, ex.id)),
        groups_resumed=len(resumed),
        rollouts_run=run.rollouts_run,
        wall_seconds=time.monotonic() - started,
        reward_weights=definition.reward_weights,
        groups_retried=retried,
        model_call_retries=run.model_call_retries,
    )
    report.write_json()
    return report
