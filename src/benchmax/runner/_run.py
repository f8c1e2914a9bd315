"""``run_environment``: run a split's examples as groups of rollouts against one endpoint."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmax._context import BOUND_MODEL_AUTH
from benchmax.auth import bind_model_auth
from benchmax.envs._observer import RolloutReport, observe_rollouts
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import Example, RolloutOutcome, RolloutRequest
from benchmax.runner._config import RunConfig
from benchmax.runner._definition import run_definition
from benchmax.runner._error_log import group_contract_error
from benchmax.runner._errors import GroupContractError, RunError
from benchmax.runner._log_capture import RolloutLogCapture
from benchmax.runner._records import LogEntry, RolloutRecord, RolloutTimings
from benchmax.runner._report import RunReport, summarize
from benchmax.runner._results import CompletedGroup, ResultsStore

__all__ = ["Progress", "run_environment"]


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


class _TranscriptObserver:
    """Collects what BaseEnv reports about the finished rollouts of this run's groups."""

    def __init__(self) -> None:
        self._reports: dict[str, RolloutReport | None] = {}

    def expect(self, rollout_ids: Sequence[str]) -> None:
        self._reports.update(dict.fromkeys(rollout_ids))

    def rollout_finished(self, report: RolloutReport) -> None:
        if report.rollout_id in self._reports:
            self._reports[report.rollout_id] = report

    def take(self, rollout_id: str) -> RolloutReport | None:
        return self._reports.pop(rollout_id, None)


async def _load_examples(env: Environment[Any, Any], config: RunConfig) -> list[Example[Any]]:
    """The split's examples (the first ``max_examples`` of them when set).

    A missing file propagates as ``FileNotFoundError``; any other failure to load becomes a
    ``RunError`` naming the split and directory.
    """
    n = config.max_examples
    try:
        if n is not None and _accepts_max_examples(env.create_dataset):
            dataset = await env.create_dataset(config.split, config.base_dir, max_examples=n)
        else:
            dataset = await env.create_dataset(config.split, config.base_dir)
        return list(itertools.islice(dataset, n))
    except (FileNotFoundError, RunError):
        raise
    except Exception as error:
        raise RunError(
            f"cannot load the {config.split} split from {config.base_dir}: "
            f"{type(error).__name__}: {error}{_noted(error)}"
        ) from error


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


class _Run:
    """State of one invocation of ``run_environment``."""

    def __init__(
        self,
        env: Environment[Any, Any],
        config: RunConfig,
        store: ResultsStore,
        examples: Sequence[Example[Any]],
        resumed: Sequence[CompletedGroup],
        on_progress: Callable[[Progress], None] | None,
    ) -> None:
        self.env = env
        self.config = config
        self.store = store
        self.examples = examples
        self.on_progress = on_progress
        self.session = os.urandom(2).hex()
        self.capture = RolloutLogCapture(config.log_level, config.secrets())
        self.observer = _TranscriptObserver()
        self.unsaved_logs: dict[int, list[LogEntry]] = {}
        self.started = time.monotonic()
        self.rollouts_run = 0
        self.first_key = _first_reward_key(env)
        self.first_sum = 0.0
        self.first_count = 0
        self.done = len(resumed)
        for group in resumed:
            self._tally(group)

    def _tally(self, group: CompletedGroup) -> None:
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

    async def run_pending(self, pending: list[tuple[int, Example[Any]]]) -> None:
        items = iter(pending)
        errors: list[BaseException] = []

        async def worker() -> None:
            for index, example in items:
                if errors:
                    return
                try:
                    await self.run_group(index, example)
                except RunError as error:  # the runner's own failure (results file)
                    errors.append(error)
                    return
                except Exception as error:
                    errors.append(self.contract_error(index, example, error))
                    return

        workers = min(self.config.max_concurrent_groups, len(pending))
        await asyncio.gather(*(worker() for _ in range(workers)))
        if errors:
            raise errors[0]

    def contract_error(
        self, index: int, example: Example[Any], error: Exception
    ) -> GroupContractError:
        return group_contract_error(
            self.env,
            index,
            example.id,
            error,
            self.config.output,
            self.config.secrets(),
            logs=self.unsaved_logs.pop(index, []),
        )

    async def run_group(self, index: int, example: Example[Any]) -> None:
        config = self.config
        attempt = self.store.next_attempt(index)
        prefix = f"{self.store.run_id}.e{index}.a{attempt}-{self.session}"
        ids = [f"{prefix}.r{k}" for k in range(config.group_size)]
        requests = [
            RolloutRequest(
                rollout_id=rollout_id,
                example=example,
                model=config.model,
                base_url=config.base_url_for(rollout_id),
                model_auth=config.model_auth,
                split=config.split,
                sampling_args=config.sampling_args,
            )
            for rollout_id in ids
        ]
        self.capture.track(ids)
        self.observer.expect(ids)
        began = time.perf_counter()
        try:
            outcomes = await self.env.run_group(requests)
        except BaseException:
            logs: list[LogEntry] = []
            for rollout_id in ids:
                logs.extend(e for e in self.capture.take(rollout_id) if e not in logs)
                self.observer.take(rollout_id)
            self.unsaved_logs[index] = logs  # a contract error's report shows them
            raise
        group_seconds = time.perf_counter() - began
        records = [
            self._record(
                index, example, k, rollout_id, attempt, outcomes[rollout_id], group_seconds
            )
            for k, rollout_id in enumerate(ids)
        ]
        group = CompletedGroup(
            example_index=index,
            example_id=example.id,
            termination_reasons=tuple(outcomes[r].termination_reason for r in ids),
            rewards=tuple(dict(outcomes[r].rewards) for r in ids),
            usage=tuple(record["usage"] for record in records),
        )
        self.store.append_group(group, records)
        self.rollouts_run += len(ids)
        self.done += 1
        self._tally(group)
        self.progress()

    def _record(
        self,
        index: int,
        example: Example[Any],
        group_index: int,
        rollout_id: str,
        attempt: int,
        outcome: RolloutOutcome,
        group_seconds: float,
    ) -> RolloutRecord:
        report = self.observer.take(rollout_id)
        timings: RolloutTimings = {"group_seconds": round(group_seconds, 6)}
        if report is not None:
            timings["model_seconds"] = round(report.model_seconds, 6)
            timings["tool_seconds"] = round(report.tool_seconds, 6)
            timings["reward_seconds"] = round(report.reward_seconds, 6)
        return {
            "type": "rollout",
            "run_id": self.store.run_id,
            "split": self.config.split,
            "example_id": example.id,
            "example_index": index,
            "group_index": group_index,
            "rollout_id": rollout_id,
            "attempt": attempt,
            "termination_reason": outcome.termination_reason,
            "rewards": dict(outcome.rewards),
            "timings": timings,
            "usage": _usage(report),
            "transcript": None if report is None else list(report.messages),
            "logs": self.capture.take(rollout_id),
        }


def _usage(report: RolloutReport | None) -> dict[str, int] | None:
    """The rollout's token usage as BaseEnv reported it (``None``: none reported)."""
    if report is None or not report.usage:
        return None
    return dict(report.usage)


def _first_reward_key(env: Environment[Any, Any]) -> str | None:
    try:
        keys = env.reward_keys
        first = keys[0]
    except Exception:
        return None
    return first if isinstance(first, str) else None


def _providers(config: RunConfig) -> dict[str, Any]:
    outer: Mapping[str, Any] = BOUND_MODEL_AUTH.get() or {}
    return {**outer, **config.auth_providers}


async def run_environment(
    env: Environment[Any, Any],
    config: RunConfig,
    *,
    on_progress: Callable[[Progress], None] | None = None,
) -> RunReport:
    """Run every example of ``config.split`` (or the first ``max_examples``) through ``env``.

    Each example becomes one group of ``group_size`` rollouts run by ``env.run_group``, at
    most ``max_concurrent_groups`` groups at once. Completed groups are appended to
    ``config.output`` as they finish; an existing results file is resumed (complete groups
    are skipped) unless its run definition differs, which raises ``ResumeMismatchError``
    unless ``config.force``. A ``run_group`` contract error stops scheduling new groups, lets
    the groups in flight finish, and raises ``GroupContractError``. The report is also
    written as JSON beside the results.
    """
    started = time.monotonic()
    examples = await _load_examples(env, config)
    store = ResultsStore.open(
        config.output,
        run_definition(env, config),
        group_size=config.group_size,
        force=config.force,
        secrets=config.secrets(),
    )
    try:
        pending: list[tuple[int, Example[Any]]] = []
        resumed: list[CompletedGroup] = []
        for i, ex in enumerate(examples):
            if store.is_complete(i, ex.id):
                resumed.append(store.groups[i])
            else:
                pending.append((i, ex))
        run = _Run(env, config, store, examples, resumed, on_progress)
        run.progress()
        with (
            run.capture.attached(),
            observe_rollouts(run.observer),
            bind_model_auth(_providers(config)),
        ):
            await run.run_pending(pending)
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
    )
    report.write_json()
    return report
