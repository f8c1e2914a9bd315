"""``benchmax run``: run an environment locally against a model endpoint or the mock model."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from benchmax._rollout_limits import LIMIT_OPTIONS
from benchmax._sampling_args import RESERVED_BODY_KEYS, validated_sampling_args
from benchmax._vocabulary import SCORING_FAILURES
from benchmax.cli._exit_codes import ChecksFailed, DetailedError, Untrustworthy
from benchmax.cli._json_output import echo_json
from benchmax.cli._options import (
    FiniteRange,
    api_key_env_option,
    auth_option,
    base_url_option,
    concurrency_option,
    data_option,
    env_arg_option,
    group_size_option,
    json_option,
    max_examples_option,
    mock_policy_option,
    model_option,
    output_option,
    renamed_option,
)
from benchmax.cli._render import render_report
from benchmax.cli._run_execution import execute, masked, report_interruption
from benchmax.cli._run_plan import given, plan_run, ray_options
from benchmax.cli._signals import TerminationSignals, terminate_like_interrupt
from benchmax.cli._targets import TargetError
from benchmax.runner import FailureShareExceeded, RunError, RunReport
from benchmax.runner._failure_share import (
    DEFAULT_MAX_FAILURE_SHARE,
    MIN_ROLLOUTS,
    is_failure,
    is_retryable_failure,
)

__all__ = ["DEFAULT_FAIL_ON_ERROR", "run_command"]

DEFAULT_FAIL_ON_ERROR = 0.1
"""``--fail-on-error``'s default: a run with more than 10% of its rollouts failed
operationally exits 4 (untrustworthy)."""


class _Seconds(click.FloatRange):
    """A positive, finite number of seconds (``inf`` and ``nan`` are refused here rather
    than by the environment, mid-run)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return seconds


SECONDS = _Seconds(min=0, min_open=True)


def _limit_options() -> Callable[[Callable[..., Any]], Callable[[Any], Any]]:
    """``run``'s options for BaseEnv limits, one per limit of ``Limits`` that offers one
    (``--model-timeout SECONDS`` ...), in the record's order."""

    def decorate(command: Callable[..., Any]) -> Any:
        for name, option in reversed(LIMIT_OPTIONS):  # click lists the last applied first
            kind = SECONDS if option.kind == "seconds" else click.IntRange(min=0)
            command = click.option(
                option.flag, name, metavar=option.metavar, type=kind, help=option.help
            )(command)
        return command

    return decorate


@click.command("run")
@click.argument("target")
@click.option(
    "--split",
    type=click.Choice(["train", "eval"]),
    default="eval",
    show_default=True,
    help="Dataset split to run.",
)
@data_option()
@env_arg_option(
    "Constructor argument (value parsed as JSON, else kept as a string); "
    "'@mock' stands for the embedded mock server's URL. Repeatable."
)
@model_option()
@base_url_option()
@api_key_env_option()
@auth_option()
@max_examples_option()
@renamed_option("--limit", "-n/--max-examples (show's --limit counts rollouts)")
@group_size_option()
@concurrency_option(8)
@output_option(
    "the results JSONL file (default runs/<env>-<timestamp>.jsonl; an existing one is resumed)"
)
@click.option("--force", is_flag=True, help="Resume a results file even if its run differs.")
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Resume -o FILE and also run again every group whose latest attempt has a rollout "
    "that failed operationally (model_error, timeouts, setup_error...; not reward_error and "
    "other scoring failures: benchmax rescore fixes those); the old attempts stay in the file.",
)
@click.option(
    "--temperature",
    type=FiniteRange(min=0),
    metavar="T",
    help="Sampling temperature sent with every model request.",
)
@click.option(
    "--top-p",
    type=FiniteRange(min=0, max=1),
    metavar="P",
    help="Nucleus sampling top_p sent with every model request.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    metavar="N",
    help="max_tokens: the cap on tokens generated per model call.",
)
@click.option(
    "--seed",
    type=int,
    metavar="N",
    help="Run seed: every rollout sends its own seed derived from N, the example and its "
    "index in the group (--sampling-arg seed=N sends N with every request instead).",
)
@click.option(
    "--sampling-arg",
    "sampling_arg_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other request body field (value parsed as JSON, else a string), e.g. top_k=20 "
    "or chat_template_kwargs='{\"enable_thinking\": false}'. Repeatable.",
)
@click.option(
    "--tokens",
    is_flag=True,
    help="Record the exact prompt ids, completion ids and logprobs of every model call "
    "(vLLM or SGLang; checked with one model call before the run).",
)
@_limit_options()
@click.option(
    "--no-model-check",
    is_flag=True,
    help="Do not stop when the endpoint's /models list lacks --model.",
)
@click.option(
    "--no-judge-check",
    is_flag=True,
    help="Do not reach each judge the environment uses once (with its credential) before "
    "the run; by default a judge refusing its key (401/403) or not answering stops the run.",
)
@click.option(
    "--max-failure-share",
    metavar="SHARE",
    type=FiniteRange(0, 1),
    default=DEFAULT_MAX_FAILURE_SHARE,
    show_default=True,
    help=f"Stop the run (finished groups kept) once at least {MIN_ROLLOUTS} rollouts ran and "
    "more than this share of them ended with one same failure (a misconfiguration); 1 never "
    "stops, 0 stops at the first failure.",
)
@click.option(
    "--fail-on-error",
    "fail_on_error",
    metavar="SHARE",
    type=FiniteRange(0, 1),
    default=DEFAULT_FAIL_ON_ERROR,
    show_default=True,
    help="Exit 4 (untrustworthy) when more than this share of the results' rollouts failed "
    "operationally (any reason but finished and the budget limits); 1 never does.",
)
@mock_policy_option("echo")
@click.option(
    "--ray",
    "use_ray",
    is_flag=True,
    help="Run the groups on a Ray cluster (needs benchmax[ray]); this process keeps the "
    "results file, progress and report.",
)
@click.option(
    "--ray-address",
    metavar="ADDRESS",
    help="Ray cluster to join (auto, ray://host:10001, host:6379); default RAY_ADDRESS, "
    "else a local Ray instance started for the run.",
)
@click.option(
    "--ray-workers",
    metavar="N",
    type=click.IntRange(min=1),
    help="Ray worker actors (default: the cluster's CPU count).",
)
@click.option(
    "--ray-worker-concurrency",
    metavar="C",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Groups in flight per Ray worker.",
)
@json_option()
def run_command(
    target: str,
    split: str,
    data_dir: Path,
    env_arg_pairs: tuple[str, ...],
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    auth_pairs: tuple[str, ...],
    max_examples: int | None,
    group_size: int,
    concurrency: int,
    output: Path | None,
    force: bool,
    retry_failed: bool,
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    seed: int | None,
    sampling_arg_pairs: tuple[str, ...],
    tokens: bool,
    no_model_check: bool,
    no_judge_check: bool,
    max_failure_share: float,
    fail_on_error: float,
    mock_policy: str,
    use_ray: bool,
    ray_address: str | None,
    ray_workers: int | None,
    ray_worker_concurrency: int,
    as_json: bool,
    **limit_values: float | int | None,
) -> None:
    """Run TARGET's examples as rollout groups and summarize the rewards.

    TARGET is path/to/file.py:Class, package.module:Class, a bundle file (loading a
    bundle runs its code: use only bundles you trust) or an installed environment name
    (an entry point of the benchmax.environments group). {rollout_id} in --base-url is
    replaced per rollout. Exit status 1 when every rollout failed, 4 when more than
    --fail-on-error of them failed operationally. Model calls are retried up to 3 times
    after a transient failure (429, 5xx, a reset connection) unless --model-retries says.
    """
    console = Console(stderr=True)
    if retry_failed:
        _check_retry_target(output)
    try:
        plan = plan_run(
            target,
            env_arg_pairs=env_arg_pairs,
            auth_pairs=auth_pairs,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            mock_policy=mock_policy,
            mock_policy_given=given("mock_policy"),
            limits=_given_values(**limit_values),
            model_check=not no_model_check,
            output=output,
            ray=ray_options(
                use_ray,
                address=ray_address,
                workers=ray_workers,
                worker_concurrency=ray_worker_concurrency,
            ),
            options={
                "split": split,
                "base_dir": data_dir,
                "group_size": group_size,
                "max_examples": max_examples,
                "max_concurrent_groups": concurrency,
                "force": force,
                "retry_failed": retry_failed,
                "tokens": tokens,
                "seed": seed,
                "judge_check": not no_judge_check,
                "max_failure_share": max_failure_share,
                "sampling_args": parse_sampling_args(
                    sampling_arg_pairs,
                    _given_values(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
                    seed_given=seed is not None,
                ),
            },
        )
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    if plan.endpoint_note is not None:
        console.print(f"[yellow]note:[/] {escape(plan.endpoint_note)}", soft_wrap=True)
    # Made before the block: a Ctrl-C while it is being entered still finds it.
    signals = TerminationSignals()
    try:
        with terminate_like_interrupt(signals):
            report = asyncio.run(execute(plan, console))
    except KeyboardInterrupt:
        report_interruption(console, plan.output)
        raise SystemExit(signals.exit_status) from None
    except FileNotFoundError as error:
        message = f"data file not found: {error.filename or error}"
        raise click.ClickException(masked(message, plan)) from None
    except FailureShareExceeded as error:
        detail = tuple(masked(line, plan) for line in error.detail)
        raise DetailedError(masked(str(error), plan), detail) from None
    except (TargetError, RunError) as error:
        raise click.ClickException(masked(str(error), plan)) from None
    except Exception as error:
        message = f"run failed: {type(error).__name__}: {error}"
        raise click.ClickException(masked(message, plan)) from None
    if as_json:
        echo_json(report.to_dict())
    else:
        render_report(report, Console())
    if plan.base_url is None:
        console.print(
            f"[bold yellow]note:[/] these rewards come from the mock model "
            f"(policy {escape(plan.mock_policy)}), not a real model",
            soft_wrap=True,
        )
    _print_next_steps(report, console)
    if report.rollouts and all(is_failure(reason) for reason in report.rollouts_by_reason):
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(report.rollouts_by_reason.items()))
        raise ChecksFailed(f"every rollout failed ({reasons}): the rewards above are all zeros")
    failed = sum(n for r, n in report.rollouts_by_reason.items() if is_failure(r))
    if report.rollouts and failed / report.rollouts > fail_on_error:
        raise Untrustworthy(
            f"untrustworthy: {failed} of {report.rollouts} rollouts"
            f" ({failed / report.rollouts:.0%}) failed operationally, more than"
            f" --fail-on-error {fail_on_error:g}; {_remedy(report)}"
        )


def _check_retry_target(output: Path | None) -> None:
    """``--retry-failed`` needs the results file it retries."""
    if output is None:
        raise click.UsageError(
            "--retry-failed reruns the failed groups of a results file: add -o FILE"
        )
    if not output.is_file():
        raise click.ClickException(f"--retry-failed: no results file at {output}")


def _failures(report: RunReport) -> tuple[int, int]:
    """The report's rollouts that failed in a way a rerun fixes, and those whose scoring
    failed (``benchmax rescore`` fixes those)."""
    retryable = sum(n for r, n in report.rollouts_by_reason.items() if is_retryable_failure(r))
    scoring = sum(n for r, n in report.rollouts_by_reason.items() if r in SCORING_FAILURES)
    return retryable, scoring


def _remedy(report: RunReport) -> str:
    """What to run next for the failed rollouts of ``report``."""
    retryable, scoring = _failures(report)
    path = report.results_path
    steps = []
    if retryable:
        steps.append(
            f"once the cause is fixed, run the same command with -o {path} --retry-failed"
            f" to run the {retryable} failed rollouts' groups again"
        )
    if scoring:
        steps.append(
            f"after fixing the reward code, 'benchmax rescore {path}' scores the {scoring}"
            " rollouts whose scoring failed again"
        )
    return "; ".join(steps) or "see the termination reasons above"


def _print_next_steps(report: RunReport, console: Console) -> None:
    """Retries this invocation made, and what to run next for failed rollouts."""
    if report.model_call_retries or report.groups_retried:
        console.print(
            f"retries: {report.model_call_retries} model call(s) retried after a transient"
            f" failure; {report.groups_retried} failed group(s) run again (--retry-failed)",
            soft_wrap=True,
        )
    retryable, scoring = _failures(report)
    if report.results_path is None or not (retryable or scoring):
        return
    console.print(f"[yellow]next:[/] {escape(_remedy(report))}", soft_wrap=True)


def _given_values(**values: Any) -> dict[str, Any]:
    """The keyword arguments that are not ``None``."""
    return {name: value for name, value in values.items() if value is not None}


def parse_sampling_args(
    pairs: tuple[str, ...], named: dict[str, Any], *, seed_given: bool = False
) -> dict[str, Any]:
    """``--temperature``-style values plus ``--sampling-arg KEY=VALUE`` pairs (each value
    parsed as JSON, else kept as a string); raises ``click.UsageError`` (exit 2) for a
    malformed pair, a key given twice (``seed`` counts ``--seed`` when ``seed_given``), or
    a key the chat loop sets itself (model, messages, tools)."""
    args = dict(named)
    for pair in pairs:
        key, equals, raw = pair.partition("=")
        key = key.strip()
        if not equals or not key or any(c.isspace() for c in key):
            raise click.UsageError(f"invalid --sampling-arg {pair!r}: expected KEY=VALUE")
        if key in RESERVED_BODY_KEYS:
            raise click.UsageError(
                f"--sampling-arg cannot set {key!r}: the chat loop sets it "
                "(use --model for the model)"
            )
        if key == "seed" and seed_given:
            raise click.UsageError(
                "--seed and --sampling-arg seed both set the seed: --seed N gives every "
                "rollout its own seed, --sampling-arg seed=N sends N with every request; "
                "use one"
            )
        if key in named:
            option = "--" + key.replace("_", "-")
            raise click.UsageError(f"{option} and --sampling-arg {key} both set {key!r}: use one")
        if key in args:
            raise click.UsageError(f"--sampling-arg {key!r} is given twice")
        try:
            args[key] = json.loads(raw, parse_constant=_refuse_constant)
        except ValueError:
            args[key] = raw
    try:  # the rules every run's sampling args follow (stream, n, JSON values)
        return validated_sampling_args(args)
    except (TypeError, ValueError) as error:
        raise click.UsageError(str(error)) from None


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")
