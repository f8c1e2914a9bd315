"""``benchmax validate``: run every pre-training check on an environment and report each."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._bundle_commands import import_local_module
from benchmax.cli._credentials import (
    MOCK_KEY,
    auth_variables,
    bearer_from_variable,
    injected_auth_names,
)
from benchmax.cli._exit_codes import ChecksFailed
from benchmax.cli._json_output import echo_json
from benchmax.cli._mock_policy import load_mock_policy
from benchmax.cli._options import (
    api_key_env_option,
    auth_option,
    base_url_option,
    data_option,
    env_arg_option,
    group_size_option,
    json_option,
    max_examples_option,
    mock_policy_option,
    model_option,
)
from benchmax.cli._targets import (
    EnvTarget,
    TargetError,
    load_target,
    parse_env_args,
    substitute_mock,
    uses_mock,
)

__all__ = ["validate_command"]

_PLACEHOLDER_URL = "http://mock.invalid/v1"
_STYLES = {"passed": "green", "failed": "bold red", "warning": "yellow", "skipped": "dim"}


def _injected_names(target: EnvTarget, env_args: dict[str, Any]) -> set[str]:
    """Credential names the environment uses (constructed once with a placeholder URL)."""
    args = substitute_mock({**target.constructor_args, **env_args}, _PLACEHOLDER_URL)
    try:
        env = target.env_class(**args)
    except Exception:  # the constructor check reports it
        return injected_auth_names(target.env_class, args)
    names = injected_auth_names(env)
    with contextlib.suppress(Exception):
        asyncio.run(env.aclose())
    return names


RUNS_CODE = (
    "note: validate imported the environment and ran its code (constructor, dataset, "
    "rollouts, reward hooks); validate only code you trust"
)


def render_validation(report: Any, console: Console) -> None:
    """The checks as a table, then one summary line."""
    table = Table(title=f"benchmax validate {escape(report.target)}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for check in report.checks:
        style = _STYLES[check.status]
        table.add_row(escape(check.name), f"[{style}]{check.status}[/]", escape(check.detail))
    console.print(table)
    console.print(f"[dim]{RUNS_CODE}[/]")
    counts = report.counts
    verdict = "[bold green]ok[/]" if report.ok else "[bold red]failed[/]"
    console.print(
        f"{verdict}: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['warning']} warning{'' if counts['warning'] == 1 else 's'}, "
        f"{counts['skipped']} skipped"
    )


@click.command("validate")
@click.argument("target")
@data_option()
@env_arg_option(
    "Constructor argument (JSON, else a string); '@mock' is the mock's URL. Repeatable."
)
@model_option()
@base_url_option()
@api_key_env_option()
@auth_option()
@mock_policy_option()
@click.option(
    "--pip-dependency",
    "pip_dependencies",
    multiple=True,
    metavar="SPEC",
    help="PEP 508 requirement the bundle declares. Repeatable.",
)
@click.option(
    "--local-module",
    "local_module_names",
    multiple=True,
    metavar="NAME",
    help="Importable module whose source the bundle check carries, as for benchmax bundle "
    "(a helper beside a single-file environment outside any project). Repeatable.",
)
@max_examples_option(2, maximum=10)
@group_size_option(2, maximum=16)
@click.option(
    "--no-fresh-interpreter",
    "skip_fresh",
    is_flag=True,
    help="Skip running the bundle in a fresh interpreter (faster, proves less).",
)
@json_option()
def validate_command(
    target: str,
    data_dir: Path,
    env_arg_pairs: tuple[str, ...],
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    auth_pairs: tuple[str, ...],
    mock_policy: str | None,
    pip_dependencies: tuple[str, ...],
    local_module_names: tuple[str, ...],
    max_examples: int,
    group_size: int,
    skip_fresh: bool,
    as_json: bool,
) -> None:
    """Check TARGET before a training run; exit status 1 when a check fails.

    TARGET is path/to/file.py:Class, package.module:Class, a bundle file or an installed
    environment name (benchmax.environments entry point). Checks the
    class, constructor, reward_keys, each split's data, prompt messages, tool schemas, a
    few rollout groups, reward variance, the bundle (run once in a fresh interpreter),
    its size and its declared dependencies; each failure says what to change.

    Validating imports TARGET and runs its code (constructor, dataset, rollouts, reward
    hooks; a bundle is unpickled): validate only code you trust.
    """
    from benchmax._cli_wording import cli_wording
    from benchmax.validation import CheckResult, ValidationConfig, ValidationReport
    from benchmax.validation import validate_environment as validate

    try:
        env_args = parse_env_args(env_arg_pairs)
        auth_vars = auth_variables(auth_pairs)
        if base_url is not None:
            if not base_url.strip():
                raise click.UsageError("--base-url must be a URL such as http://localhost:8000/v1")
            if model is None:
                raise click.UsageError("--model is required with --base-url")
            if mock_policy is not None:
                raise click.UsageError("--mock-policy needs the embedded mock (omit --base-url)")
            if uses_mock(env_args):
                raise click.UsageError(
                    "'@mock' in --env-arg needs the embedded mock (omit --base-url)"
                )
        policy = load_mock_policy(mock_policy) if mock_policy is not None else None
        model_auth: ModelAuth | None = (
            bearer_from_variable(api_key_env, "--api-key-env") if api_key_env else None
        )
        providers: dict[str, ModelAuth] = {
            name: bearer_from_variable(var, f"--auth {name}")
            for name, var in auth_vars.items()
            if base_url is not None
        }
    except TargetError as error:
        raise click.ClickException(str(error)) from None

    try:
        env_target = load_target(target)  # (a file target's directory joins sys.path)
        local_modules = [import_local_module(name) for name in local_module_names]
    except TargetError as error:
        report = ValidationReport.of(
            target, [CheckResult("target", "failed", f"{error}; check the path and class name")]
        )
    else:
        if base_url is None:
            names = set(auth_vars) | _injected_names(env_target, env_args)
            providers = {name: StaticBearerAuth(MOCK_KEY) for name in names}
        extra: dict[str, Any] = {} if model_auth is None else {"model_auth": model_auth}
        try:
            config = ValidationConfig(
                base_dir=data_dir,
                constructor_args={**env_target.constructor_args, **env_args},
                model=model or "mock-model",
                base_url=base_url,
                auth_providers=providers,
                policy=policy,
                examples=max_examples,
                group_size=group_size,
                pip_dependencies=pip_dependencies,
                local_modules=local_modules,
                fresh_interpreter=not skip_fresh,
                **extra,
            )
        except (TypeError, ValueError) as error:
            raise click.ClickException(str(error)) from None
        with cli_wording():  # the bundle checks name --local-module / --pip-dependency
            report = asyncio.run(validate(env_target.env_class, config, target=target))
    if as_json:
        echo_json(report.to_json())
    else:
        render_validation(report, Console(soft_wrap=False))
    if not report.ok:
        failed = report.counts["failed"]
        raise ChecksFailed(f"{failed} check{'' if failed == 1 else 's'} failed", reported=as_json)
