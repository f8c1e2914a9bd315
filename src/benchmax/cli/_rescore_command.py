"""The ``rescore`` command: the stored transcripts of a results file scored again by an
environment's reward hooks, without calling the model."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.auth import ModelAuth
from benchmax.cli._credentials import auth_variables, bearer_from_variable
from benchmax.cli._options import (
    auth_option,
    concurrency_option,
    data_option,
    env_arg_option,
    mock_policy_option,
    output_option,
)
from benchmax.cli._output_paths import free_path
from benchmax.cli._results_reading import reading
from benchmax.cli._scoring_env import scoring_env, target_definition
from benchmax.cli._tables import add_columns, print_whole
from benchmax.cli._targets import (
    EnvTarget,
    TargetError,
    import_file,
    load_class_target,
    load_target,
    parse_env_args,
)
from benchmax.results import Results, read_results
from benchmax.runner import RescoreReport, RunError, rescore_results

__all__ = ["rescore_command"]


def _read(path: Path) -> Results:
    with reading(path):
        return read_results(path)


def _header_target(env_definition: Mapping[str, Any], data_dir: Path) -> EnvTarget:
    """The environment class the results header names.

    A ``module:Class`` that does not import from here is looked for as a file under the data
    directory, its parents and the working directory (``module/path.py``).
    """
    if not isinstance(env_definition, Mapping):
        raise TargetError(
            "the results header's definition.env is not an object; pass TARGET "
            "(path/to/env.py:Class) to name the environment"
        )
    if "class" not in env_definition:
        raise TargetError(
            "the run used a bundle: pass the bundle file (or file.py:Class) as TARGET"
        )
    spec = env_definition["class"]
    module_name, _, class_name = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
    if not (module_name and class_name and all(module_name.split("."))):
        raise TargetError(
            f"the results header's definition.env.class ({spec!r}) is not module:Class; "
            "pass TARGET (path/to/env.py:Class) to name the environment"
        )
    try:
        return load_class_target(spec)
    except TargetError as error:
        module, _, qualname = spec.rpartition(":")
        relative = Path(*module.split("."))
        roots = [data_dir.resolve(), *data_dir.resolve().parents[:3], Path.cwd()]
        for root in roots:
            for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
                if candidate.is_file():
                    import_file(candidate)
                    return load_class_target(f"{module}:{qualname}")
        raise TargetError(
            f"{error}; pass TARGET (path/to/env.py:Class) to name the environment"
        ) from None


def _data_directory(given: Path | None, header: Mapping[str, Any], results: Path) -> Path:
    """``--data`` when given, else the data directory the results header records (``.``
    for files written before headers recorded it)."""
    if given is not None:
        return given
    recorded = header.get("data_dir")
    if not isinstance(recorded, str) or not recorded:
        return Path(".")
    if not Path(recorded).is_dir():
        raise TargetError(
            f"the run's data directory {recorded} (recorded in {results}) is not there; "
            "pass --data DIR"
        )
    return Path(recorded)


def _recorded_policy(spec: object, results: Path, data_dir: Path) -> str:
    """The run's mock policy (default ``echo``). A ``file.py:function`` recorded relative
    to the directory the run started in, and not found from here, is looked for beside the
    results file and up to three directories above it, then under the data directory."""
    if not isinstance(spec, str) or not spec:
        return "echo"
    module_part, _, name = spec.rpartition(":")
    relative = Path(module_part)
    if not module_part.endswith(".py") or relative.is_absolute() or relative.is_file():
        return spec
    folder = results.parent.absolute()
    for root in (folder, *folder.parents[:3], data_dir.absolute()):
        if (root / relative).is_file():
            return f"{root / relative}:{name}"
    return spec


def _with_overrides(source: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run's environment definition with ``--env-arg`` overrides applied."""
    definition = dict(source)
    if overrides:
        definition["constructor_args"] = {**(source.get("constructor_args") or {}), **overrides}
    return definition


async def _rescore(
    source: Path,
    output: Path,
    target: EnvTarget,
    env_args: dict[str, Any],
    definition: dict[str, Any],
    *,
    data_dir: Path,
    providers: Mapping[str, ModelAuth],
    mock_policy: str,
    allow_missing: bool,
    concurrency: int,
) -> RescoreReport:
    async with scoring_env(
        target, env_args, providers, mock_policy=mock_policy, needs="rescoring needs transcripts"
    ) as (env, credentials):
        return await rescore_results(
            env,
            source,
            output,
            base_dir=data_dir,
            env_definition=definition,
            auth_providers=credentials,
            allow_missing=allow_missing,
            max_concurrent_groups=concurrency,
        )


def _render_rescore(report: RescoreReport, console: Console) -> None:
    table = Table(title="rewards: before → after rescoring", title_justify="left")
    add_columns(table, "key", "old mean", "new mean", "change", "old std", "new std")
    for key in dict.fromkeys([*report.old_stats, *report.new_stats]):
        old, new = report.old_stats.get(key), report.new_stats.get(key)
        table.add_row(
            escape(key),
            f"{old.mean:.3f}" if old else "-",
            f"{new.mean:.3f}" if new else "-",
            f"{new.mean - old.mean:+.3f}" if old and new else "-",
            f"{old.std:.3f}" if old else "-",
            f"{new.std:.3f}" if new else "-",
        )
    print_whole(console, table)
    reasons = Table(title="termination reasons", title_justify="left")
    add_columns(reasons, "reason", "before", "after")
    for reason in dict.fromkeys([*report.old_reasons, *report.new_reasons]):
        reasons.add_row(
            escape(reason),
            str(report.old_reasons.get(reason, 0)),
            str(report.new_reasons.get(reason, 0)),
        )
    print_whole(console, reasons)
    console.print(
        f"rescored {report.rescored} rollouts, kept {report.kept} that did not reach scoring; "
        f"{report.changed} of {report.rollouts} changed"
    )
    if report.missing_examples:
        console.print(
            f"[yellow]left out {len(report.missing_examples)} example(s) not in the dataset[/]"
        )
    console.print(f"results: {escape(str(report.output))}", soft_wrap=True)


@click.command("rescore")
@click.argument("results", type=click.Path(path_type=Path))
@click.argument("target", required=False)
@data_option(
    "Data directory the run used (the examples' payloads are read from it; default: the "
    "one the results header records, else .).",
    default=None,
)
@output_option("the new results file (default: RESULTS-stem.rescored.jsonl beside RESULTS)")
@env_arg_option("Override a constructor argument of the run (value parsed as JSON). Repeatable.")
@auth_option("Bind InjectedAuth(NAME) (e.g. a judge) to the bearer key in variable VAR.")
@mock_policy_option()
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Leave out examples the dataset no longer has instead of stopping.",
)
@click.option("--force", is_flag=True, help="Replace the -o file when it exists.")
@concurrency_option(8)
def rescore_command(
    results: Path,
    target: str | None,
    data_dir: Path | None,
    output: Path | None,
    env_arg_pairs: tuple[str, ...],
    auth_pairs: tuple[str, ...],
    mock_policy: str | None,
    allow_missing: bool,
    force: bool,
    concurrency: int,
) -> None:
    """Score the stored transcripts of RESULTS again, without calling the model.

    TARGET (file.py:Class, package.module:Class or a bundle) is the environment whose
    reward hooks score; by default the class named in the results header, with the run's
    constructor arguments. Judges are called as in a run. Without --mock-policy, '@mock'
    arguments point to the run's recorded mock policy (else echo).
    """
    loaded = _read(results)
    definition = loaded.definition
    source_env: Mapping[str, Any] = definition.get("env") or {}
    try:
        if output is not None and output.exists() and not force:
            raise TargetError(f"{output} exists; pass --force to replace it, or another -o")
        data_dir = _data_directory(data_dir, loaded.header, results)
        if not data_dir.is_dir():
            raise TargetError(f"data directory not found: {data_dir}")
        overrides = parse_env_args(env_arg_pairs)
        providers: dict[str, ModelAuth] = {
            name: bearer_from_variable(variable, f"--auth {name}")
            for name, variable in auth_variables(auth_pairs).items()
        }
        env_target = load_target(target) if target else _header_target(source_env, data_dir)
        recorded_args = (
            source_env.get("constructor_args") if isinstance(source_env, Mapping) else None
        )
        env_args = {
            **env_target.constructor_args,
            **(recorded_args if isinstance(recorded_args, Mapping) else {}),
            **overrides,
        }
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    policy = mock_policy or _recorded_policy(definition.get("mock_policy"), results, data_dir)
    output = output or free_path(results.parent, f"{results.stem}.rescored", ".jsonl")
    console = Console()
    try:
        report = asyncio.run(
            _rescore(
                results,
                output,
                env_target,
                env_args,
                target_definition(env_target, env_args)
                if target
                else _with_overrides(source_env, overrides),
                data_dir=data_dir,
                providers=providers,
                mock_policy=policy,
                allow_missing=allow_missing,
                concurrency=concurrency,
            )
        )
    except (TargetError, RunError, OSError) as error:
        raise click.ClickException(str(error)) from None
    _render_rescore(report, console)
