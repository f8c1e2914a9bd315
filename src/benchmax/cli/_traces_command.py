"""``benchmax traces``: production logs into a train/eval dataset, and the logged model's
baseline on it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.auth import InjectedAuth, ModelAuth
from benchmax.cli._credentials import auth_variables, bearer_from_variable, bearer_or_no_auth
from benchmax.cli._json_output import echo_json
from benchmax.cli._options import (
    FiniteRange,
    auth_option,
    env_arg_option,
    eval_fraction_option,
    json_option,
    mock_policy_option,
    output_option,
    renamed_option,
    seed_option,
)
from benchmax.cli._scoring_env import scoring_env, target_definition
from benchmax.cli._targets import (
    MOCK_URL_MARKER,
    EnvTarget,
    TargetError,
    load_target,
    parse_env_args,
    uses_mock,
)

__all__ = ["traces_command"]

TEACHER_AUTH = "teacher"
"""The ``InjectedAuth`` name the teacher's credential is bound to."""


def _summary_table(summary: Any) -> Table:
    from benchmax.cli._data_workflow import summary_table

    rows: list[tuple[str, object]] = [
        *((f"file {f.name}", f.format) for f in summary.files),
        ("records read", summary.records),
        ("  malformed, skipped", summary.malformed),
        ("logged replies", summary.calls),
        *((f"  dropped: {reason}", n) for reason, n in summary.dropped.items()),
        *((f"scrubbed: {kind}", n) for kind, n in summary.scrubbed.items()),
        (f"train rows ({summary.train_groups} conversations/users)", summary.train_rows),
        (f"eval rows ({summary.eval_groups} conversations/users)", summary.eval_rows),
    ]
    if summary.relabeled or summary.relabel_failed:
        rows.append(("relabeled by the teacher", summary.relabeled))
        rows.append(("  teacher failed (logged reply kept)", summary.relabel_failed))
    return summary_table("traces summary", rows)


@dataclass(frozen=True)
class _BaselineInputs:
    """What ``--baseline`` needs, read before the logs are (a wrong target, a missing
    variable or a useless ``--mock-policy`` stops the command at once)."""

    target: EnvTarget
    env_args: dict[str, Any]
    providers: dict[str, ModelAuth]
    mock_policy: str


def _baseline_inputs(
    target_spec: str,
    env_arg_pairs: tuple[str, ...],
    auth_pairs: tuple[str, ...],
    mock_policy: str | None,
) -> _BaselineInputs:
    """Read the ``--baseline`` target, its arguments and credentials. Raises ``TargetError``."""
    target = load_target(target_spec)
    env_args = {**target.constructor_args, **parse_env_args(env_arg_pairs)}
    if mock_policy is not None and not uses_mock(env_args):
        raise TargetError(
            f"--mock-policy: no {MOCK_URL_MARKER!r} constructor argument of --baseline uses "
            f"the embedded mock (e.g. --env-arg judge_base_url={MOCK_URL_MARKER})"
        )
    providers: dict[str, ModelAuth] = {
        name: bearer_from_variable(variable, f"--auth {name}")
        for name, variable in auth_variables(auth_pairs).items()
    }
    return _BaselineInputs(target, env_args, providers, mock_policy or "echo")


async def _baseline(inputs: _BaselineInputs, data_dir: Path) -> Any:
    """Score the eval split with the target's rewards (see ``scoring_env`` for ``'@mock'``
    arguments and credentials); the header keeps the arguments as given."""
    from benchmax.datagen import score_logged_replies

    async with scoring_env(
        inputs.target,
        inputs.env_args,
        inputs.providers,
        mock_policy=inputs.mock_policy,
        needs="the baseline scores transcripts",
    ) as (env, credentials):
        return await score_logged_replies(
            env,
            data_dir,
            env_definition=target_definition(inputs.target, inputs.env_args),
            auth_providers=credentials,
        )


@click.command("traces")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_option(
    "train.jsonl, eval.jsonl (and baseline.jsonl) to this directory",
    directory=True,
    required=True,
    name="output_dir",
)
@click.option(
    "--unit",
    type=click.Choice(["turn", "conversation"]),
    default="turn",
    show_default=True,
    help="A row per logged assistant reply, or per conversation (its longest history).",
)
@click.option("--keep-failed", is_flag=True, help="Keep failed calls that logged a reply.")
@click.option("--keep-tool-only", is_flag=True, help="Keep replies that only call tools.")
@click.option(
    "--only-model",
    "models",
    multiple=True,
    metavar="PATTERN",
    help="Keep only calls of models matching PATTERN (shell-style). Repeatable.",
)
@renamed_option("--model", "--only-model (--model names the model requests are sent to)")
@click.option(
    "--min-reply-chars",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Drop shorter replies.",
)
@click.option(
    "--max-chars",
    type=click.IntRange(min=1),
    help="Drop rows whose history and reply hold more characters.",
)
@click.option(
    "--similarity",
    type=FiniteRange(0, 1, min_open=True),
    default=0.75,
    show_default=True,
    help="Character-trigram similarity of (last user message, reply) that makes a near-duplicate.",
)
@click.option("--no-near-dedupe", is_flag=True, help="Remove exact duplicates only.")
@click.option(
    "--no-scrub",
    is_flag=True,
    help="Keep secrets and personal data (API keys, tokens, emails, phones, cards) as logged.",
)
@click.option(
    "--phone-region",
    default="US",
    show_default=True,
    metavar="CC",
    help="Region of phone numbers written without a country code.",
)
@eval_fraction_option("Share of rows for eval.jsonl (whole conversations, or users when logged).")
@seed_option()
@click.option("--strict", is_flag=True, help="Stop at the first malformed record (exit 3).")
@click.option("--teacher-model", metavar="NAME", help="Relabel ground truths with this model.")
@click.option("--teacher-base-url", metavar="URL", help="The teacher's OpenAI-compatible endpoint.")
@click.option(
    "--teacher-api-key-env",
    metavar="VAR",
    help=f"Variable holding the teacher's bearer key (bound to InjectedAuth({TEACHER_AUTH!r})).",
)
@click.option(
    "--relabel-concurrency",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Teacher requests in flight at once.",
)
@click.option(
    "--baseline",
    "baseline_target",
    metavar="ENV_TARGET",
    help="Score the eval split's logged replies with this environment's rewards "
    "(file.py:Class, package.module:Class or a bundle; it reads -o as its data directory) "
    "into baseline.jsonl.",
)
@env_arg_option(
    "Constructor argument of the --baseline environment (JSON value; '@mock' is the embedded "
    "mock's URL, e.g. judge_base_url=@mock). Repeatable."
)
@auth_option("Bind InjectedAuth(NAME) of the --baseline environment to the key in VAR.")
@mock_policy_option()
@json_option()
def traces_command(
    inputs: tuple[Path, ...],
    output_dir: Path,
    unit: str,
    keep_failed: bool,
    keep_tool_only: bool,
    models: tuple[str, ...],
    min_reply_chars: int,
    max_chars: int | None,
    similarity: float,
    no_near_dedupe: bool,
    no_scrub: bool,
    phone_region: str,
    eval_fraction: float,
    seed: int,
    strict: bool,
    teacher_model: str | None,
    teacher_base_url: str | None,
    teacher_api_key_env: str | None,
    relabel_concurrency: int,
    baseline_target: str | None,
    env_arg_pairs: tuple[str, ...],
    auth_pairs: tuple[str, ...],
    mock_policy: str | None,
    as_json: bool,
) -> None:
    """Turn production logs (INPUTS: files or directories) into train.jsonl and eval.jsonl.

    Formats, detected per file: LiteLLM standard logging payloads, {"request", "response"}
    lines, {"messages": [...]} JSONL, OpenTelemetry GenAI spans as OTLP JSON. Malformed
    records are skipped and listed; failed calls are dropped. --mock-policy is the
    policy of the mock that --baseline's '@mock' arguments (e.g. a judge) point to.
    """
    from benchmax._secret_masking import credential_secrets, mask_secrets
    from benchmax._url_credentials import split_url_credential
    from benchmax.cli._data_workflow import (
        StageProgress,
        print_skipped,
        run_workflow,
        wrote_splits,
    )
    from benchmax.datagen import TraceFormatError, TracesConfig, TracesError, traces
    from benchmax.rewards import Judge, NgramDiversityConfig

    console = Console(stderr=True)
    try:
        if (teacher_model is None) != (teacher_base_url is None):
            raise click.UsageError("--teacher-model and --teacher-base-url go together")
        if mock_policy is not None and baseline_target is None:
            raise click.UsageError("--mock-policy needs --baseline (its '@mock' arguments use it)")
        if (
            teacher_api_key_env
            and teacher_base_url is not None
            and split_url_credential(teacher_base_url)[1] is not None
        ):
            raise TargetError(
                "--teacher-base-url carries a password and --teacher-api-key-env a bearer key, "
                "but a request has one Authorization header: keep the credential in one of them"
            )
        config = TracesConfig(
            unit="conversation" if unit == "conversation" else "turn",
            keep_failed=keep_failed,
            keep_tool_only=keep_tool_only,
            min_reply_chars=min_reply_chars,
            max_chars=max_chars,
            models=models,
            dedupe=None
            if no_near_dedupe
            else NgramDiversityConfig(n=3, similarity_threshold=similarity),
            scrub=() if no_scrub else TracesConfig().scrub,
            phone_region=phone_region,
            eval_fraction=eval_fraction,
            seed=seed,
            strict=strict,
            relabel_concurrency=relabel_concurrency,
        )
        teacher = (
            Judge(model=teacher_model, base_url=teacher_base_url, auth=InjectedAuth(TEACHER_AUTH))
            if teacher_model is not None and teacher_base_url is not None
            else None
        )
        teacher_auth = bearer_or_no_auth(
            teacher_api_key_env if teacher else None, "--teacher-api-key-env"
        )
        baseline = (
            _baseline_inputs(baseline_target, env_arg_pairs, auth_pairs, mock_policy)
            if baseline_target is not None
            else None
        )
    except (TargetError, ValueError) as error:
        raise click.ClickException(str(error)) from None
    # The teacher's key (and a password in its URL) never reaches the rows, even when the
    # teacher echoes it.
    secrets = credential_secrets([teacher_auth], teacher_base_url) if teacher else ()

    def mask(text: str) -> str:
        return mask_secrets(text, secrets)

    progress = StageProgress(console, {"reading": "bytes"})  # then rows written
    summary = run_workflow(
        lambda: traces(
            inputs, output_dir, config, teacher=teacher, on_progress=progress, mask=mask
        ),
        progress=progress,
        output_dir=output_dir,
        refused=(TracesError, TraceFormatError, TargetError),
        credentials={TEACHER_AUTH: teacher_auth},
        quiet_logs=teacher is not None,  # a failing teacher: one line below, no tracebacks
    )
    if summary.relabel_failed:
        console.print(
            f"[yellow]teacher failed[/] on {summary.relabel_failed} of "
            f"{summary.relabel_failed + summary.relabeled} requests (the logged replies "
            f"kept): {escape(mask(summary.relabel_error))}",
            soft_wrap=True,
        )
    out = Console(quiet=as_json)  # --json: the document below instead
    out.print(_summary_table(summary))
    print_skipped(console, summary.malformed_examples, summary.malformed)
    out.print(wrote_splits(summary.train_path, summary.eval_path))
    if summary.rows and not summary.eval_rows and eval_fraction > 0:
        console.print(
            "[yellow]note:[/] eval.jsonl is empty: every row belongs to one conversation, or "
            "to conversations linked by users they share, and a group never crosses the split",
            soft_wrap=True,
        )
    if baseline is None:
        if as_json:
            echo_json({"summary": summary, "baseline": None})
        return
    if summary.eval_rows == 0:
        raise click.ClickException("no eval rows: nothing to score for --baseline")
    try:
        report = asyncio.run(_baseline(baseline, output_dir))
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    except Exception as error:
        from benchmax.runner import RunError

        if isinstance(error, RunError | OSError):
            raise click.ClickException(f"--baseline: {error}") from None
        raise
    table = Table(title="baseline: logged replies of the eval split", title_justify="left")
    for column in ("key", "mean", "std"):
        table.add_column(column, justify="left" if column == "key" else "right")
    for key, stats in report.new_stats.items():
        table.add_row(escape(key), f"{stats.mean:.3f}", f"{stats.std:.3f}")
    out.print(table)
    out.print(
        f"wrote {escape(str(report.output))} ({report.rollouts} rollouts); compare a trained "
        f"model's run with: benchmax compare {escape(str(report.output))} RUN.jsonl",
        soft_wrap=True,
    )
    if as_json:
        stats = {key: {"mean": x.mean, "std": x.std} for key, x in report.new_stats.items()}
        scored = {"output": report.output, "rollouts": report.rollouts, "reward_stats": stats}
        echo_json({"summary": summary, "baseline": scored})
