"""``benchmax train``: GRPO on an environment with TRL, watchable, resumable, evaluated.

The options are derived from ``benchmax.training.TrainConfig`` (one per field, with its
documentation); ``--config FILE.toml`` holds the same keys, and options given on the
command line override the file. Ctrl-C or SIGTERM stops after the current step with a
checkpoint; a second one stops at once. ``--num-processes N`` launches N data-parallel
processes (``_train_launch``); a process a launcher started (``WORLD_SIZE``) trains as
one rank of the run, and only rank 0 prints.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import shlex
import signal
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmax.cli._compare_command import render_comparison
from benchmax.cli._credentials import auth_variables, bearer_from_variable
from benchmax.cli._exit_codes import Untrustworthy
from benchmax.cli._json_output import echo_json
from benchmax.cli._launcher import launcher_prefix
from benchmax.cli._options import json_option
from benchmax.cli._run_plan import bundle_definition
from benchmax.cli._signals import TerminationSignals, terminate_like_interrupt
from benchmax.cli._targets import TargetError, load_target, parse_env_args, uses_mock
from benchmax.results import RunDirectory
from benchmax.training._config import (
    ConfigError,
    Setting,
    TrainConfig,
    config_settings,
    read_config_file,
)

__all__ = ["train_command"]

_SETTINGS = {setting.name: setting for setting in config_settings()}
_REPORT_SECONDS = 20.0
"""How long a rank other than 0 waits before it leaves a run that stopped or could not
start: rank 0 ends the same way and reports it, and the launcher stops the other processes
as soon as one exits with a failure status, so they must not exit before it."""


def _shown_default(setting: Setting) -> str:
    default = setting.default
    if default is None or default == () or default == {}:
        return ""
    if isinstance(default, bool):
        return ""
    if setting.name in ("output_dir", "model"):
        return ""
    return f" [default: {default}]"


def _option(setting: Setting) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click option of one ``TrainConfig`` field (its value ``None`` when not given)."""
    names = [setting.flag, *([setting.short] if setting.short else [])]
    text = setting.doc + _shown_default(setting)
    kind = setting.kind
    if kind == "bool":
        return click.option(*names, setting.name, is_flag=True, default=None, help=text)
    if kind in ("pairs", "table"):
        return click.option(*names, setting.name, multiple=True, metavar=setting.metavar, help=text)
    if kind == "choices":
        return click.option(
            *names,
            setting.name,
            multiple=True,
            type=click.Choice(setting.choices),
            help=text,
        )
    types: dict[str, Any] = {
        "int": click.INT,
        "float": click.FLOAT,
        "str": click.STRING,
        "path": click.Path(path_type=Path),
        "choice": click.Choice(setting.choices),
    }
    return click.option(
        *names, setting.name, type=types[kind], default=None, metavar=setting.metavar, help=text
    )


def _train_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for setting in reversed(config_settings()):
        if setting.name != "target":
            command = _option(setting)(command)
    return command


def _given(context: click.Context, name: str) -> bool:
    return context.get_parameter_source(name) is ParameterSource.COMMANDLINE


def _merged(context: click.Context, values: Mapping[str, Any], file: Path | None) -> TrainConfig:
    """File values, then the options given on the command line; raises ``ClickException``
    naming the option or the file's key that is wrong."""
    merged: dict[str, Any] = {}
    if file is not None:
        try:
            merged = read_config_file(file)
        except (OSError, ValueError) as error:  # ConfigError names the key and the file
            raise click.ClickException(str(error)) from None
    from_file = set(merged)
    for name, setting in _SETTINGS.items():
        if name == "target":
            if values.get("target") is not None:
                merged["target"] = values["target"]
                from_file.discard(name)
            continue
        if not _given(context, name):
            continue
        value = values[name]
        try:
            if name == "env_args":
                value = {**merged.get(name, {}), **parse_env_args(value)}
            elif name == "auth":
                value = {**merged.get(name, {}), **auth_variables(value)}
        except TargetError as error:
            raise click.ClickException(str(error)) from None
        if setting.kind == "choices":
            value = tuple(value)
        merged[name] = value
        from_file.discard(name)
    if "target" not in merged:
        raise click.UsageError("TARGET is required (or a target key in --config)")
    try:
        return TrainConfig(**merged)
    except ConfigError as error:
        known = _SETTINGS.get(error.key)
        if error.key in from_file:
            where = f"{error.key} in {file}"
        else:
            where = "TARGET" if error.key == "target" or known is None else known.flag
        raise click.ClickException(f"invalid {where}: {error.reason}") from None


class _Display:
    """The terminal side of a run: a rich progress bar with the running reward, and one
    line per evaluation and checkpoint."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps · reward {task.fields[reward]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("train", total=None, reward="-", start=False)
        self.group_rewards: list[float] = []

    def __call__(self, event: Any) -> None:
        kind = event.kind
        if kind == "loading":
            self.console.print(f"[dim]{escape(event.message)}[/]", soft_wrap=True)
        elif kind == "started":
            self.progress.update(self.task, total=event.steps, completed=event.step - 1)
            self.progress.start_task(self.task)
            self.progress.start()
        elif kind == "group" and event.reward is not None:
            self.group_rewards.append(event.reward)
            running = sum(self.group_rewards) / len(self.group_rewards)
            self.progress.update(self.task, reward=f"{running:.3f} (step so far)")
        elif kind == "step":
            self.group_rewards.clear()
            reward = "-" if event.reward is None else f"{event.reward:.3f}"
            self.progress.update(self.task, completed=event.step, reward=reward)
        elif kind == "eval" and event.reward is not None:
            key = event.reward_key or "reward"
            self.console.print(
                f"[bold]eval[/] after step {event.step}: mean {escape(key)} "
                f"{event.reward:.3f} ({escape(str(event.path or ''))})",
                soft_wrap=True,
            )
        elif kind == "checkpoint" and event.path is not None:
            self.console.print(f"checkpoint: {escape(str(event.path))}", soft_wrap=True)
        elif kind == "note" and event.message:
            self.console.print(f"[yellow]{escape(event.message)}[/]", soft_wrap=True)

    def close(self) -> None:
        self.progress.stop()


_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# torch.save on a full disk: "unexpected pos 6400 vs 6292" or "file write failed"
_DISK_FULL_PHRASES = ("No space left on device", "unexpected pos", "file write failed")


def _disk_full(error: BaseException) -> bool:
    """Whether ``error`` (or an error it came from) says the disk is full."""
    seen: BaseException | None = error
    for _ in range(20):  # a cycle in __context__ cannot loop forever
        if seen is None:
            return False
        if getattr(seen, "errno", None) in _DISK_FULL_ERRNOS:
            return True
        if any(phrase in str(seen) for phrase in _DISK_FULL_PHRASES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _resume_command(config: TrainConfig) -> str:
    """The command resuming this run, launched as this one was (``uv run ...`` under uv)."""
    config_file = str(Path(config.output_dir) / "config.toml")
    return shlex.join(
        [*launcher_prefix(), "benchmax", "train", "--config", config_file, "--resume"]
    )


@click.command("train")
@click.argument("target", required=False)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE.toml",
    help="Read the settings from a TOML file (keys as the options, with _: group_size = 8); "
    "options given here override it. Every run saves its own as OUTPUT/config.toml.",
)
@_train_options
@json_option()
@click.pass_context
def train_command(
    context: click.Context,
    /,
    target: str | None,
    config_file: Path | None,
    as_json: bool,
    **values: Any,
) -> None:
    """Train MODEL with GRPO (TRL) on TARGET's train split, watchably.

    TARGET is path/to/file.py:Class, package.module:Class or a bundle file. Writes
    --output-dir: rollouts.jsonl (benchmax show/view/compare read it), metrics.jsonl,
    eval/step-N.jsonl (the eval split before step 1, every --eval-every steps and after the
    last) and checkpoints/step-N. benchmax view OUTPUT draws the training page. Needs the
    trl extra (pip install 'benchmax[trl]').
    """
    config = _merged(context, {**values, "target": target}, config_file)
    assert config.target is not None
    if not config.data.is_dir():
        raise click.ClickException(f"data directory not found: {config.data}")
    try:
        env_target = load_target(config.target)
        if uses_mock(dict(config.env_args)) or uses_mock(dict(env_target.constructor_args)):
            raise TargetError("'@mock' arguments need benchmax run's embedded mock model")
        providers = {
            name: bearer_from_variable(variable, f"--auth {name}")
            for name, variable in config.auth.items()
        }
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    if config.accelerate_config is not None and not config.accelerate_config.is_file():
        raise click.ClickException(f"accelerate config file not found: {config.accelerate_config}")
    if config.num_processes > 1 and "WORLD_SIZE" not in os.environ:
        from benchmax.cli._train_launch import launch_processes

        try:
            status = launch_processes(config, as_json=as_json)
        except ImportError as error:
            raise click.ClickException(
                f"benchmax train needs the trl extra ({error.name or error} is missing): "
                "pip install 'benchmax[trl]'"
            ) from None
        if status:
            raise SystemExit(status)
        return
    env_factory = functools.partial(env_target.env_class, **env_target.constructor_args)
    definition = bundle_definition(env_target, dict(config.env_args))
    _run(config, env_factory, providers, definition, as_json=as_json)


def _rank() -> int:
    """This process's rank under a launcher (``RANK``), 0 without one."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _run(
    config: TrainConfig,
    env_factory: Callable[..., Any],
    providers: Mapping[str, Any],
    definition: Mapping[str, Any] | None,
    *,
    as_json: bool,
) -> None:
    from benchmax.training import StopRequest, TrainError, train

    rank = _rank()
    console = Console(stderr=True, quiet=rank != 0)  # only rank 0 reports
    if rank:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # rank 0 warns once
    logging.getLogger("benchmax").addHandler(logging.NullHandler())  # rollout logs: files only
    warnings.filterwarnings("ignore", category=FutureWarning)
    stop = StopRequest()
    display = _Display(console)
    signals = TerminationSignals()

    interrupted_eval: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.evaluating is not None:  # an evaluation changes no weights: stop it now
            interrupted_eval.append(stop.evaluating)
            stop.request("interrupted")
            raise KeyboardInterrupt
        if stop.requested:
            raise KeyboardInterrupt
        stop.request("interrupted")
        console.print(
            "[bold yellow]stopping[/] after the current step, with a checkpoint "
            "(interrupt again to stop at once, without one)",
            soft_wrap=True,
        )

    result = None
    try:
        with terminate_like_interrupt(signals, watchdog=False):
            previous = signal.signal(signal.SIGINT, on_signal)
            try:
                result = train(
                    config,
                    env_factory,
                    auth_providers=providers,
                    env_definition=definition,
                    stop=stop,
                    on_event=display,
                )
            finally:
                signal.signal(signal.SIGINT, previous)
    except KeyboardInterrupt:
        display.close()
        if interrupted_eval:
            _report_eval_stop(console, config, interrupted_eval[0])
        else:
            _report_stop(console, config, saved=None)
        _leave(rank, signals.exit_status)
    except TrainError as error:
        display.close()
        if rank:  # every rank meets the same setting or directory: rank 0 says it
            _leave(rank, 1)
        raise click.ClickException(str(error)) from None
    except FileNotFoundError as error:
        display.close()
        raise click.ClickException(f"file not found: {error.filename or error}") from None
    except Exception as error:  # the environment, the model loader or TRL failed
        display.close()
        where = f"rank {rank}: " if rank else ""
        if _disk_full(error):
            raise click.ClickException(
                f"{where}training failed: the disk holding {config.output_dir} is full (a file "
                "could not be written whole); free space, then resume with: "
                f"{_resume_command(config)}"
            ) from None
        raise click.ClickException(
            f"{where}training failed: {type(error).__name__}: {error}"
        ) from None
    finally:
        display.close()
    assert result is not None
    if result.failure is not None:  # its checkpoint was reported as it was written
        raise Untrustworthy(f"untrustworthy: {result.failure}")
    if result.stopped:
        _report_stop(console, config, saved=result.checkpoint)
        _leave(rank, signals.exit_status)
    if rank:
        return
    if as_json:
        echo_json(
            {
                "output_dir": result.output_dir,
                "steps_done": result.steps_done,
                "comparison": None if result.comparison is None else result.comparison.to_json(),
            }
        )
        return
    out = Console()
    out.print(f"trained {result.steps_done} steps: {escape(str(result.output_dir))}")
    if result.comparison is not None:
        layout = RunDirectory(result.output_dir)
        base, final = layout.eval_file(0), layout.eval_file(layout.eval_steps()[-1])
        out.print("[bold]base vs final[/] on the eval split (eval/compare.json):")
        render_comparison(result.comparison, base, final, out)
    out.print(f"see it: benchmax view {shlex.quote(str(result.output_dir))}", soft_wrap=True)


def _leave(rank: int, status: int) -> NoReturn:
    """Exit with ``status``; a rank other than 0 first gives rank 0 :data:`_REPORT_SECONDS`
    to report and exit (the launcher then ends this process)."""
    if rank:
        with contextlib.suppress(KeyboardInterrupt):  # the launcher's SIGTERM, as an interrupt
            time.sleep(_REPORT_SECONDS)
    raise SystemExit(status)


def _report_eval_stop(console: Console, config: TrainConfig, step: int) -> None:
    """What an interrupt during the evaluation after ``step`` kept and lost."""
    layout = RunDirectory(Path(config.output_dir))
    steps = layout.checkpoint_steps()
    if step == 0:
        weights = "nothing was trained yet"
    elif steps and steps[-1] == step:
        weights = f"the weights of step {step} are saved in {layout.checkpoint(step)}"
    else:
        last = f"the last checkpoint is step-{steps[-1]}" if steps else "no checkpoint was written"
        weights = f"the weights of step {step} were not saved ({last})"
    console.print(
        f"[bold red]stopped[/] during the evaluation after step {step}: "
        f"{escape(str(layout.eval_file(step)))} keeps the groups that finished, the others "
        f"were not run; {escape(weights)}",
        soft_wrap=True,
    )
    if steps:
        console.print(f"resume with: {escape(_resume_command(config))}", soft_wrap=True)


def _report_stop(console: Console, config: TrainConfig, *, saved: Path | None) -> None:
    if saved is not None:
        console.print(f"[bold red]stopped:[/] checkpoint {escape(str(saved))}", soft_wrap=True)
    else:
        steps = RunDirectory(Path(config.output_dir)).checkpoint_steps()
        last = f"the last checkpoint is step-{steps[-1]}" if steps else "no checkpoint was written"
        console.print(
            "[bold red]stopped at once:[/] no checkpoint of the step in progress (its "
            f"weights were mid-update); {last}",
            soft_wrap=True,
        )
        if not steps:
            return
    console.print(f"resume with: {escape(_resume_command(config))}", soft_wrap=True)
