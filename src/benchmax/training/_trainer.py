"""``train(config, env)``: a GRPO run with TRL, written to a run directory as it goes.

The trainer is TRL's ``GRPOTrainer`` driven through ``RolloutFunc``: each optimizer step
runs ``prompts_per_step`` benchmax groups of ``group_size`` rollouts against the embedded
``PolicySampler`` (the live weights) or a vLLM server (``base_url``; TRL syncs the weights
to it). Every group is written to ``rollouts.jsonl`` as it completes, every step to
``metrics.jsonl``; the eval split runs before step 1, every ``eval_every`` steps and after
the last; checkpoints are written every ``save_every`` steps and after the last. A
:class:`StopRequest` (the CLI sets it on Ctrl-C or SIGTERM) ends the run after the current
step with a checkpoint.

In several processes (``_ranks``: a launcher's ``WORLD_SIZE``) every rank trains its own
replica on whole groups of the step; rank 0 writes the run directory (the other ranks'
groups reach it after each step's rollouts), evaluates while the others wait, and every
rank stops after the step in which any of them was asked to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from benchmax._file_replace import replace_file
from benchmax._secret_masking import credential_secrets
from benchmax.auth import ModelAuth, StaticBearerAuth, bind_model_auth
from benchmax.envs import Environment
from benchmax.results import (
    Comparison,
    MetricsLine,
    MetricsWriter,
    RolloutsWriter,
    RunDirectory,
    RunError,
    compare_base,
    step_metrics,
    tracker_metrics,
    trainer_metrics,
)
from benchmax.runner import RunConfig, run_definition
from benchmax.training._config import (
    ConfigError,
    TrainConfig,
    config_differences,
    config_toml,
    read_config_file,
)
from benchmax.training._coverage_check import StepCoverage
from benchmax.training._errors import TrainingError
from benchmax.training._evaluation import EMBEDDED_SAMPLER_URL, evaluate, sampling_args
from benchmax.training._learning_signal import LearningWatch
from benchmax.training._precision import MASTER_DTYPE
from benchmax.training._ranks import Ranks, join_ranks
from benchmax.training._trl_rollouts import (
    BRANCH_ROWS_KEY,
    COVERAGE_KEY,
    _append_row,
    _placeholder,
    _placeholder_token,
)
from benchmax.trajectory import Trajectory

if TYPE_CHECKING:
    from benchmax.training._trl_rollouts import RolloutFunc

__all__ = ["StopRequest", "TrainError", "TrainEvent", "TrainResult", "train"]

_STATE_FILE = "benchmax_state.json"
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TrainError(TrainingError):
    """The run cannot start or go on: the message says why (one line)."""


class StopRequest:
    """Ask a running :func:`train` to stop after its current step (thread- and
    signal-safe); it saves a checkpoint and returns. :attr:`evaluating` is the step whose
    evaluation is running (``None`` between evaluations): an interrupt then need not wait
    for a step to end (the CLI stops the evaluation at once; its results file keeps the
    finished groups)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""
        self.evaluating: int | None = None

    def request(self, reason: str = "stop requested") -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()


@dataclass(frozen=True, slots=True)
class TrainEvent:
    """Something the run reports while it goes (for a progress display).

    ``kind``: ``loading``, ``started`` (``step`` = the first step to train), ``group``
    (a group of ``step`` finished; ``reward`` its mean scalar reward), ``step`` (``metrics``
    is its ``metrics.jsonl`` line), ``eval`` (``message`` says which, ``reward`` the mean of
    its reward key ``reward_key``, ``path`` its results file), ``checkpoint`` (``path``),
    ``note`` (a warning, in ``message``).
    """

    kind: Literal["loading", "started", "group", "step", "eval", "checkpoint", "note"]
    step: int
    steps: int
    message: str = ""
    reward: float | None = None
    metrics: Mapping[str, object] | None = None
    path: Path | None = None
    reward_key: str | None = None


@dataclass(frozen=True, slots=True)
class TrainResult:
    """How a run ended: the last step trained, whether it stopped early (a
    :class:`StopRequest`, or no step could learn), the last checkpoint written, base vs
    final (``None`` when stopped early or with a single evaluation) and ``failure``: why no
    step could learn (every rollout of several steps failed operationally; one line), or
    ``None``."""

    output_dir: Path
    steps_done: int
    stopped: bool
    checkpoint: Path | None
    comparison: Comparison | None
    failure: str | None = None


def _backend() -> Any:
    try:
        from benchmax.training import _trl_backend
    except ImportError as error:
        raise TrainError(
            f"benchmax train needs the trl extra ({error.name or error} is missing): "
            "pip install 'benchmax[trl]'"
        ) from None
    return _trl_backend


def _providers(config: TrainConfig, given: Mapping[str, ModelAuth] | None) -> dict[str, ModelAuth]:
    if given is not None:
        return dict(given)
    providers: dict[str, ModelAuth] = {}
    for name, variable in config.auth.items():
        value = os.environ.get(variable)
        if not value and not _VARIABLE_NAME.fullmatch(variable):
            # Most likely the key itself, pasted where its variable's name belongs.
            raise TrainError(
                f"auth {name} takes the name of the environment variable holding the key, not "
                f"the key itself: the {len(variable)} characters given are not a variable "
                "name (not repeated here, in case they are the key)"
            )
        if not value:
            raise TrainError(f"auth {name} names environment variable {variable}, which is not set")
        providers[name] = StaticBearerAuth(value)
    return providers


def _checked_start(config: TrainConfig, layout: RunDirectory) -> int:
    """The step the run starts after (0, or the checkpoint's step when resuming).

    A resume of a run stopped before its first checkpoint starts it over (step 0); the
    newest checkpoint must read whole (a torn one is named with the fix)."""
    if not config.resume:
        if layout.holds_run():
            how = (
                "pass --resume to continue it"
                if layout.checkpoint_steps()
                else "it has no checkpoint yet: pass --resume to start it over with its settings"
            )
            raise TrainError(
                f"{layout.root} already holds a training run: {how}, or choose another --output-dir"
            )
        return 0
    if not layout.config.is_file():
        raise TrainError(f"nothing to resume in {layout.root}: it has no config.toml")
    try:
        saved = TrainConfig(**read_config_file(layout.config))
    except (ConfigError, OSError, ValueError, TypeError) as error:
        raise TrainError(f"cannot resume: {error}") from None
    differences = config_differences(saved, config)
    if differences:
        raise TrainError(
            f"cannot resume {layout.root} with other settings ({'; '.join(differences)}); "
            "only steps, eval_every, save_every, save_total_limit, report_to, torch_threads "
            "and min_token_coverage may change"
        )
    steps = layout.checkpoint_steps()
    if not steps:
        return 0
    torn = layout.torn_checkpoint_file(steps[-1])
    if torn is not None:
        path, problem = torn
        checkpoint = layout.checkpoint(steps[-1])
        then = (
            f"it continues from step-{steps[-2]}, the last complete checkpoint"
            if len(steps) > 1
            else "it starts over, as no other checkpoint is complete"
        )
        raise TrainError(
            f"checkpoint {checkpoint} is torn: {path.name}: {problem}; remove it "
            f"(rm -r {shlex.quote(str(checkpoint))}) and pass --resume again: {then}"
        )
    if steps[-1] >= config.steps:
        raise TrainError(
            f"the run in {layout.root} already trained {steps[-1]} steps: pass a larger "
            "--steps to continue it"
        )
    return steps[-1]


class _Run:
    """The state of one run that the trainer's hooks update (see ``TrainingHooks``)."""

    def __init__(
        self,
        config: TrainConfig,
        layout: RunDirectory,
        *,
        start: int,
        reward_weights: Mapping[str, float] | None,
        evaluate_at: Callable[[int], None],
        stop: StopRequest,
        on_event: Callable[[TrainEvent], None],
        ranks: Ranks,
    ) -> None:
        self.config = config
        self.ranks = ranks
        self.layout = layout
        self.start = start
        self.reward_weights = reward_weights
        self.evaluate_at = evaluate_at
        self.stop = stop
        self.on_event = on_event
        self.rollouts: RolloutsWriter | None = None
        self.metrics: MetricsWriter | None = None
        self.version = start
        self.current_step = start + 1
        self.version_of_step: dict[int, int] = {}
        self.groups: dict[int, list[Sequence[Trajectory]]] = {}
        self.local: dict[int, list[list[Trajectory]]] = {}  # this rank's groups, to share
        self.lines: dict[int, MetricsLine] = {}
        self.began: dict[int, float] = {}
        self.generation_seconds: dict[int, float] = {}
        self.eval_seconds: dict[int, float] = {}
        self.checkpoint: Path | None = None
        self.calls_done = start
        self.coverage: dict[int, StepCoverage] = {}
        self.rollout: RolloutFunc | None = None  # set once the trainer exists
        self.watch = LearningWatch(
            steps_to_run=config.steps - start, output_dir=str(config.output_dir)
        )
        self.failure: str | None = None
        self.on_weights: Callable[[], None] = lambda: None  # the sampler's weights_updated

    # -- rollouts ---------------------------------------------------------------------------

    def __call__(self, prompts: Sequence[object], trainer: Any) -> dict[str, list[object]]:
        """TRL's ``rollout_func``: the RolloutFunc's call, tagged with the step it is for."""
        step = int(trainer.state.global_step) + 1
        self.current_step = step
        self.version_of_step[step] = self.version
        started = time.perf_counter()
        assert self.rollout is not None
        output = self.rollout(prompts, trainer)
        self.calls_done = self.rollout.calls_done
        counted: Mapping[str, Sequence[object]] = output
        if self.ranks.count > 1:
            counted = self._share(step, output, trainer)
        self.generation_seconds[step] = time.perf_counter() - started
        coverage = StepCoverage.of(counted)
        self.coverage[step] = coverage
        problem = coverage.shortfall(self.config.min_token_coverage, self.groups.get(step, ()))
        if problem is not None:
            raise TrainError(f"step {step}: {problem} (rollouts in {self.layout.rollouts})")
        return output

    def _share(
        self, step: int, output: dict[str, list[object]], trainer: Any
    ) -> Mapping[str, Sequence[object]]:
        """Every rank's groups of ``step`` to every rank (the metrics line and the coverage
        check need them all; rank 0 writes the other ranks' groups after its own), and
        ``output`` given masked extra rows up to the most any rank returned (TRL gathers
        per-row tensors, which must be as long on every rank; a rollout's extra branches
        make them differ). Returns every rank's coverage columns."""
        mine = (self.local.pop(step, []), len(output["prompt_ids"]), output["rollout_id"])
        everyone = self.ranks.gather((*mine, output[COVERAGE_KEY]))
        for rank, (groups, _, _, _) in enumerate(everyone):
            for group in groups:
                if not self.ranks.main:
                    self.groups.setdefault(step, []).append(group)
                elif rank:
                    self._write(step, group)
        missing = max(rows for _, rows, _, _ in everyone) - len(output["prompt_ids"])
        if missing and output[BRANCH_ROWS_KEY]:
            filler = _placeholder(_placeholder_token(trainer))
            for _ in range(missing):
                _append_row(output, filler)
            counts = output[BRANCH_ROWS_KEY]
            counts[-1] = cast(int, counts[-1]) + missing  # extra rows of the last rollout
        return {
            "rollout_id": [i for _, _, ids, _ in everyone for i in ids],
            COVERAGE_KEY: [c for _, _, _, counts in everyone for c in counts],
        }

    def group_done(self, trajectories: Sequence[Trajectory]) -> None:
        step = self.current_step
        if self.ranks.count > 1:
            self.local.setdefault(step, []).append(list(trajectories))
        if self.ranks.main:
            self._write(step, trajectories)

    def _write(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        assert self.rollouts is not None
        records = self.rollouts.append(step, self.version_of_step.get(step, 0), trajectories)
        self.groups.setdefault(step, []).append(records)
        rewards = [sum(t.rewards.values()) for t in records]
        self.on_event(
            TrainEvent(
                "group",
                step,
                self.config.steps,
                reward=sum(rewards) / len(rewards) if rewards else None,
            )
        )

    # -- TrainingHooks ----------------------------------------------------------------------

    def step_begun(self, step: int) -> None:
        self.began[step] = time.perf_counter()

    def step_ended(self, step: int) -> tuple[bool, bool]:
        self.version += 1
        self.on_weights()
        seconds = time.perf_counter() - self.began.get(step, time.perf_counter())
        self.line(step)["seconds"] = {
            "step": seconds,
            "generation": self.generation_seconds.get(step),
        }
        verdict = self.watch.observe(self.line(step))
        if verdict.warning is not None:
            self.on_event(TrainEvent("note", step, self.config.steps, message=verdict.warning))
        if verdict.failure is not None:
            self.failure = verdict.failure
            self.stop.request(verdict.failure)
        last = step >= self.config.steps
        every = self.config.eval_every
        if self.failure is None and (last or (every and step % every == 0)):
            started = time.perf_counter()
            self.evaluate_at(step)
            self.line(step)["seconds"]["eval"] = time.perf_counter() - started
        every = self.config.save_every
        stopping = self.ranks.any(self.stop.requested) and not last
        save = last or stopping or bool(every and step % every == 0)
        return save, stopping

    def line(self, step: int) -> MetricsLine:
        if step not in self.lines:
            self.lines[step] = step_metrics(
                step,
                self.groups.pop(step, []),
                self.reward_weights,
                weights_version=self.version_of_step.get(step, 0),
                scale_rewards=self.config.advantage_scaling,
            )
            coverage = self.coverage.pop(step, None)
            if coverage is not None:  # what TRL was handed, not only what stitching allows
                self.lines[step]["token_coverage"] = coverage.share
        return self.lines[step]

    def tracker_logs(self, step: int) -> Mapping[str, float]:
        return tracker_metrics(self.line(step))

    def logged(self, step: int, logs: Mapping[str, object]) -> None:
        line = self.line(step)
        del self.lines[step]
        line["trainer"] = trainer_metrics(logs)
        if self.metrics is None:  # a rank other than 0
            return
        self.metrics.append(line)
        self.on_event(
            TrainEvent("step", step, self.config.steps, reward=line["reward"], metrics=line)
        )

    def saved(self, step: int, checkpoint: Path) -> None:
        self.checkpoint = checkpoint
        if not self.ranks.main:
            return
        state = {"step": step, "calls_done": self.calls_done, "weights_version": self.version}
        (checkpoint / _STATE_FILE).write_text(json.dumps(state) + "\n")
        self.checkpoint = checkpoint
        if self.config.save_total_limit is not None:
            for old in _prune_checkpoints(self.layout, self.config.save_total_limit):
                limit = self.config.save_total_limit
                message = f"removed {old} (--save-total-limit {limit})"
                self.on_event(TrainEvent("note", step, self.config.steps, message, path=old))
        self.on_event(TrainEvent("checkpoint", step, self.config.steps, path=checkpoint))


def _prune_checkpoints(layout: RunDirectory, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints of ``layout``; the deleted paths."""
    import shutil

    steps = layout.checkpoint_steps()
    removed = [layout.checkpoint(step) for step in steps[: max(len(steps) - keep, 0)]]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _joined(config: TrainConfig) -> Ranks:
    """This process's place among the launcher's processes, checked against ``config``."""
    try:
        ranks = join_ranks()
    except TrainingError as error:
        raise TrainError(str(error)) from None
    wanted = config.num_processes
    if ranks.count == 1 and wanted > 1:
        raise TrainError(
            f"num_processes {wanted} needs a launcher: run benchmax train --num-processes "
            f"{wanted} (it launches them), accelerate launch or torchrun"
        )
    if wanted not in (1, ranks.count):
        raise TrainError(
            f"num_processes is {wanted} but the launcher started {ranks.count} processes "
            "(WORLD_SIZE): give the launcher's count or leave num_processes out"
        )
    if config.prompts_per_step % ranks.count:
        raise TrainError(
            f"prompts_per_step {config.prompts_per_step} does not divide among "
            f"{ranks.count} processes: each runs whole groups"
        )
    if ranks.sharded and config.base_url is None:
        raise TrainError(
            "DeepSpeed and FSDP need --base-url (a vLLM server): the embedded sampler "
            "samples each process's own copy of the model, which they shard"
        )
    return ranks


def _calls_done(layout: RunDirectory, step: int) -> int:
    try:
        state = json.loads((layout.checkpoint(step) / _STATE_FILE).read_text())
        calls = state["calls_done"]
    except (OSError, ValueError, KeyError, TypeError):
        return step  # one rollout_func call per step
    return calls if isinstance(calls, int) and calls >= 0 else step


def train(
    config: TrainConfig,
    env: Callable[..., Environment[Any, Any]],
    *,
    auth_providers: Mapping[str, ModelAuth] | None = None,
    env_definition: Mapping[str, object] | None = None,
    stop: StopRequest | None = None,
    on_event: Callable[[TrainEvent], None] | None = None,
) -> TrainResult:
    """Train ``config.model`` with GRPO on ``env``'s train split (see the module docstring).

    ``env`` is the environment class (or any factory), called as ``env(**config.env_args)``
    for the training rollouts and for each evaluation. ``auth_providers`` bind the
    environment's ``InjectedAuth`` names (default: read from the variables ``config.auth``
    names). ``env_definition`` replaces the class path in the results headers (a bundle's
    ``{"bundle_digest": ...}``). ``on_event`` receives :class:`TrainEvent` s (on rank 0
    only when the run has several processes).

    Under a launcher (``WORLD_SIZE`` above 1: ``benchmax train --num-processes N``,
    ``accelerate launch``, ``torchrun``) every process calls ``train`` with the same
    arguments and they train data-parallel (see the module docstring); the result's
    ``comparison`` is ``None`` on ranks other than 0.

    Raises :class:`TrainError` for a run that cannot start (a directory holding another run,
    nothing to resume, too few examples, the trl extra missing, ``num_processes`` above 1
    without a launcher or unlike the launcher's count, DeepSpeed or FSDP without
    ``base_url``); what the environment, the model loader or TRL raise propagates.
    """
    ranks = _joined(config)
    config = dataclasses.replace(config, num_processes=ranks.count)
    layout = RunDirectory(Path(config.output_dir))
    created = ranks.main and not layout.root.exists()  # the directory is rank 0's
    try:
        return _locked_train(
            config, env, layout, auth_providers, env_definition, stop, on_event, ranks
        )
    except BaseException:
        if created and [path.name for path in layout.root.iterdir()] == [layout.lock.name]:
            shutil.rmtree(layout.root)  # refused before writing anything: leave no directory
        raise


def _locked_train(
    config: TrainConfig,
    env: Callable[..., Environment[Any, Any]],
    layout: RunDirectory,
    auth_providers: Mapping[str, ModelAuth] | None,
    env_definition: Mapping[str, object] | None,
    stop: StopRequest | None,
    on_event: Callable[[TrainEvent], None] | None,
    ranks: Ranks,
) -> TrainResult:
    with contextlib.ExitStack() as held:
        if ranks.main:  # the run directory is rank 0's
            try:  # check, config and run under one lock: a second run writes nothing
                held.enter_context(layout.claimed())
            except RunError as error:
                raise TrainError(str(error)) from None
        return _claimed_train(
            config,
            env,
            layout,
            auth_providers=auth_providers,
            env_definition=env_definition,
            stop=stop or StopRequest(),
            emit=(on_event if ranks.main else None) or (lambda event: None),
            ranks=ranks,
        )


def _claimed_train(
    config: TrainConfig,
    env: Callable[..., Environment[Any, Any]],
    layout: RunDirectory,
    *,
    auth_providers: Mapping[str, ModelAuth] | None,
    env_definition: Mapping[str, object] | None,
    stop: StopRequest,
    emit: Callable[[TrainEvent], None],
    ranks: Ranks,
) -> TrainResult:
    start = _checked_start(config, layout)
    _check_model(config.model)
    ranks.barrier()  # every rank has read the directory before rank 0 changes it
    providers = _providers(config, auth_providers)
    backend = _backend()
    import torch

    from benchmax.training._models import load_model
    from benchmax.training._sampler import PolicySampler
    from benchmax.training._trl_rollouts import (
        RolloutFunc,
        benchmax_reward,
        dataset_rows,
        load_examples,
    )

    torch.set_num_threads(config.torch_threads)
    train_env = env(**config.env_args)
    closing: list[Callable[[], None]] = []
    env_closed = False
    try:
        examples = load_examples(train_env, "train", config.data, max_examples=config.max_examples)
        if len(examples) < config.prompts_per_step:
            raise TrainError(
                f"the train split has {len(examples)} example(s), fewer than "
                f"--prompts-per-step {config.prompts_per_step}"
            )
        emit(TrainEvent("loading", start, config.steps, message=f"loading {config.model}"))
        model, tokenizer = load_model(config.model, dtype=MASTER_DTYPE)
        if not torch.cuda.is_available():
            parameters = sum(p.numel() for p in model.parameters())
            note = _slow_cpu_note(config, parameters)
            if note:
                emit(TrainEvent("note", start, config.steps, note))
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if not config.force:
            _check_tools_rendered(config, train_env, tokenizer)
        if ranks.main:
            if config.resume:
                layout.cut_after(start)  # start 0: a run killed before its first checkpoint
            replace_file(
                layout.config,
                config_toml(dataclasses.replace(config, resume=False, force=False)).encode(),
            )
        definition_config = RunConfig(
            model=config.served_model,
            base_url=config.base_url or EMBEDDED_SAMPLER_URL,
            split="train",
            base_dir=config.data,
            group_size=config.group_size,
            max_examples=config.max_examples,
            sampling_args=sampling_args(config),
            constructor_args=config.env_args,
            env_definition=env_definition,
            definition_extras={"training": _training_definition(config)},
            seed=config.seed,
            tokens=True,
        )
        judged: list[bool] = []

        def evaluate_at(step: int) -> None:
            if hasattr(trainer, "vllm_generation") and step:
                trainer.vllm_generation.sync_weights()  # server mode: the eval sees step N
            if not ranks.main:
                return  # the others wait for rank 0 at the next collective
            stop.evaluating = step
            try:
                report = evaluate(
                    config,
                    layout,
                    step,
                    env=env,
                    base_url=base_url,
                    auth_providers=providers,
                    env_definition=env_definition,
                    judge_check=not judged,
                )
            finally:
                stop.evaluating = None
            judged.append(True)
            key, stats = next(iter(report.reward_stats.items()), (None, None))
            emit(
                TrainEvent(
                    "eval",
                    step,
                    config.steps,
                    message=f"eval step {step}: {layout.eval_file(step)}",
                    reward=None if stats is None else stats.mean,
                    path=layout.eval_file(step),
                    reward_key=key,
                )
            )

        run = _Run(
            config,
            layout,
            start=start,
            reward_weights=getattr(train_env, "reward_weights", None),
            evaluate_at=evaluate_at,
            stop=stop,
            on_event=emit,
            ranks=ranks,
        )
        trainer = backend.make_trainer(
            config,
            model=model,
            tokenizer=tokenizer,
            dataset_rows=dataset_rows(examples),
            reward=benchmax_reward,
            rollout_func=run,
            hooks=run,
            checkpoints=layout.checkpoints,
        )
        if config.base_url is None:
            sampler = PolicySampler(
                trainer.model,
                tokenizer,
                model_name=config.served_model,
                max_sequence_tokens=config.max_sequence_tokens,
            )
            sampler.start()
            closing.append(sampler.close)
            base_url = sampler.base_url
            rollout_url = sampler.rollout_url  # token-in/token-out turns per rollout
            run.on_weights = sampler.weights_updated
        else:
            base_url = rollout_url = config.base_url
        # The header records no reward_weights here (as before the definition held them).
        definition = dataclasses.replace(
            run_definition(train_env, definition_config),
            data_dir=config.data,
            reward_weights=None,
            secrets=credential_secrets(providers.values(), config.base_url),
        )
        if ranks.main:
            run.rollouts = RolloutsWriter(
                layout.rollouts, definition, prompts_per_step=config.prompts_per_step
            )
            closing.append(run.rollouts.close)
            run.metrics = MetricsWriter(layout.metrics)
            closing.append(run.metrics.close)
        run.rollout = rollout = RolloutFunc(
            train_env,
            examples,
            base_url=rollout_url,
            model=config.served_model,
            sampling_args=sampling_args(config),
            seed=config.seed,
            on_group=run.group_done,
            calls_done=_calls_done(layout, start) if start else 0,
            every_branch=True,  # the trainer (BranchingGRPOTrainer) trains every branch
        )
        closing.append(rollout.close)  # it closes train_env too
        env_closed = True
        with bind_model_auth(providers):
            if not start:
                evaluate_at(0)
            emit(TrainEvent("started", start + 1, config.steps))
            resume_from = str(layout.checkpoint(start)) if start else None
            trainer.train(resume_from_checkpoint=resume_from)
        steps_done = int(trainer.state.global_step)
        stopped = steps_done < config.steps or run.failure is not None
        comparison = None if stopped or not ranks.main else compare_base(layout)
        return TrainResult(
            output_dir=layout.root,
            steps_done=steps_done,
            stopped=stopped,
            checkpoint=run.checkpoint,
            comparison=comparison,
            failure=run.failure,
        )
    finally:
        for close in reversed(closing):
            close()
        if not env_closed:
            _close_env(train_env)


def _check_model(spec: str) -> None:
    """Refuse a model spec that names nothing (a typo of a built-in name gets "did you
    mean") before anything is imported, loaded or written."""
    from benchmax.training._models import BUILTIN_MODELS, resolve_model

    if spec in BUILTIN_MODELS:
        return  # converted (once, slowly) when loaded
    try:
        resolve_model(spec)
    except ValueError as error:
        raise TrainError(str(error)) from None


def _check_tools_rendered(config: TrainConfig, env: object, tokenizer: Any) -> None:
    """Refuse an environment offering tools that the model's chat template drops (the
    model would never see them)."""
    from benchmax.training._tool_template import dropped_tools, offered_tools

    dropped = dropped_tools(tokenizer, offered_tools(env))
    if dropped:
        raise TrainError(
            f"the environment offers tools ({', '.join(dropped)}) that {config.model}'s chat "
            "template does not render, so the model would never see them: use a model whose "
            "template renders tools (smollm2-135m-instruct, Qwen2.5/Qwen3 instruct models) "
            "or pass --force to train anyway"
        )


_CPU_FLOPS_PER_THREAD = 2e10
"""A rough sustained float32 rate of one CPU core (flop/s), for :func:`_slow_cpu_note`."""


def _slow_cpu_note(config: TrainConfig, parameters: int) -> str | None:
    """What will make a CPU step take well over a minute, or ``None``. The estimate: 8
    flops per parameter per sampled token (2 to sample it, 6 to train on it, prompts
    left out) over P x K x ``max_tokens`` tokens, at ~2e10 flop/s per torch thread."""
    sequences = config.prompts_per_step * config.group_size
    tokens = sequences * config.max_tokens
    trained = parameters if not config.lora else parameters // 3  # no weight gradients
    seconds = (
        (2 * parameters + 6 * trained) * tokens / (_CPU_FLOPS_PER_THREAD * config.torch_threads)
    )
    if seconds < 90:
        return None
    return (
        f"on a CPU a step may take ~{seconds / 60:.0f} min: {sequences} rollouts "
        f"(--prompts-per-step x -k) of up to {config.max_tokens} tokens (--max-tokens) with "
        f"{parameters / 1e6:.0f}M parameters; fewer or shorter rollouts, --lora or a GPU are faster"
    )


def _close_env(env: Environment[Any, Any]) -> None:
    import asyncio

    asyncio.run(env.aclose())


def _training_definition(config: TrainConfig) -> dict[str, object]:
    """What the rollouts header records about training (the settings a resume keeps)."""
    return {
        "model": config.model,
        "prompts_per_step": config.prompts_per_step,
        "learning_rate": config.learning_rate,
        "beta": config.beta,
        "loss": config.loss,
        "lora": config.lora,
    }
