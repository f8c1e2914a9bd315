"""``benchmax run``: run an environment locally against a model endpoint or the mock model."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import json
import math
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from benchmax._modelhttp import ModelsUnreachable, get_models
from benchmax._url_credentials import split_url_credential
from benchmax.auth import ModelAuth, ModelRequestContext, StaticBearerAuth
from benchmax.cli._bundle_commands import bundle_class_target
from benchmax.cli._credentials import (
    MOCK_KEY,
    auth_variables,
    bearer_from_variable,
    injected_auth_names,
)
from benchmax.cli._exit_codes import ChecksFailed
from benchmax.cli._json_output import echo_json
from benchmax.cli._options import (
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
from benchmax.cli._render import progress_bar, render_report
from benchmax.cli._signals import TerminationSignals, terminate_like_interrupt
from benchmax.cli._targets import (
    MOCK_URL_MARKER,
    USER_CODE_ERRORS,
    EnvTarget,
    TargetError,
    described,
    import_object,
    load_target,
    parse_env_args,
    substitute_mock,
    uses_mock,
)
from benchmax.envs._sampling_args import RESERVED_BODY_KEYS
from benchmax.envs.base._limits import LIMIT_OPTIONS, apply_limits
from benchmax.envs.environment import Environment
from benchmax.runner import (
    ExecutorError,
    NoModelAuth,
    Progress,
    RayExecutor,
    RunConfig,
    RunError,
    RunReport,
    read_results,
    run_environment,
)
from benchmax.runner._config import mask_secrets
from benchmax.runner._failure_share import DEFAULT_MAX_FAILURE_SHARE, MIN_ROLLOUTS, is_failure

__all__ = ["load_mock_policy", "run_command"]

MOCK_MODEL = "mock-model"


class _Seconds(click.FloatRange):
    """A positive, finite number of seconds (``inf`` and ``nan`` are refused here rather
    than by the environment, mid-run)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return seconds


SECONDS = _Seconds(min=0, min_open=True)


class _Finite(click.FloatRange):
    """A float range that refuses ``nan`` (which every range comparison lets through)
    and ``inf``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


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


MOCK_PLACEHOLDER_URL = "http://mock.invalid/v1"  # replaced by the server's URL once it listens


def load_mock_policy(spec: str) -> Any:
    """``echo``, ``tool_exerciser``, ``package.module:function`` or ``file.py:function``."""
    from benchmax.testing import load_policy

    if spec.rpartition(":")[0].endswith(".py"):
        policy, _module = import_object(spec, "mock policy")
        if not callable(policy):
            raise TargetError(f"mock policy {spec!r} is not callable")
        return policy
    try:
        return load_policy(spec)
    except (ValueError, TypeError) as error:
        raise TargetError(str(error)) from error


@dataclass(frozen=True, slots=True)
class _Endpoint:
    """Where the policy model and the ``@mock`` arguments point for this run."""

    base_url: str
    mock_url: str | None


@contextlib.asynccontextmanager
async def _endpoint(
    base_url: str | None, policy: Any, *, tokens: bool = False
) -> AsyncIterator[_Endpoint]:
    if base_url is not None:
        yield _Endpoint(base_url=base_url, mock_url=None)
        return
    from benchmax.testing import MockModelServer

    async with MockModelServer(policy, record=False, tokens=tokens) as server:
        yield _Endpoint(
            base_url=f"{server.origin}/sessions/{{rollout_id}}/v1", mock_url=server.base_url
        )


def _check_endpoint(
    base_url: str, shown_url: str, model: str, model_auth: ModelAuth, *, check_model: bool
) -> str | None:
    """Preflight ``GET {base_url}/models`` with the run's own credentials.

    Raises ``TargetError`` when the endpoint cannot be reached, refuses the credentials
    (HTTP 401/403) or, with ``check_model``, lists models of which none is ``model``
    (naming the closest ones).
    Returns a note when the check could not be made (no usable model list: the run goes on).
    """
    if "{" in base_url:
        return "endpoint check skipped: the base URL changes per rollout ({rollout_id})"
    context = ModelRequestContext(base_url=base_url, model=model, rollout_id="preflight")
    try:
        headers = dict(asyncio.run(model_auth.headers_for_request(context)))
    except Exception as error:
        raise TargetError(f"cannot get the model credentials: {type(error).__name__}") from None
    try:
        response = asyncio.run(get_models(base_url, headers))
    except ModelsUnreachable as error:
        reason = str(error)
        if shown_url != base_url:
            reason = reason.replace(base_url, shown_url)
        raise TargetError(f"cannot reach the model endpoint {shown_url}: {reason}") from None
    if response.status in (401, 403):
        raise TargetError(
            f"the model endpoint {shown_url} refused the credentials (HTTP "
            f"{response.status} on GET /models); check the key in --api-key-env"
        )
    if not check_model:
        return None
    skipped = f"model check skipped: {shown_url} has no usable /models"
    if response.status != 200:
        return f"{skipped} (HTTP {response.status})"
    try:
        names = _served_models(response.json())
    except ValueError:
        names = None
    if not names:
        return f"{skipped} (not an OpenAI model list)"
    if model not in names:
        close = difflib.get_close_matches(model, names, n=3, cutoff=0.3)
        hint = f"closest: {', '.join(close)}" if close else f"it serves {', '.join(names[:5])}"
        raise TargetError(
            f"model {model!r} is not served by {shown_url} ({hint}); "
            "pass --no-model-check if the endpoint accepts models it does not list"
        )
    return None


def _served_models(data: Any) -> list[str] | None:
    """The ``id`` of every model in an OpenAI ``/models`` answer; ``None`` for another shape."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    names = [m.get("id") for m in data["data"] if isinstance(m, dict)]
    return [name for name in names if isinstance(name, str)] or None


def _construct(target: EnvTarget, args: Mapping[str, Any]) -> Environment[Any, Any]:
    try:
        return target.env_class(**args)
    except USER_CODE_ERRORS as error:
        raise TargetError(f"cannot construct {target.label}: {described(error)}") from error


@dataclass(frozen=True, slots=True)
class _Plan:
    """Everything ``run`` resolved from the command line before anything starts."""

    target: EnvTarget
    env_args: dict[str, Any]
    config: RunConfig
    base_url: str | None  # None: the embedded mock model answers
    mock_policy: str
    policy: Any
    auth_names: frozenset[str]
    limits: dict[str, float | int]
    endpoint_note: str | None = None
    ray: RayExecutor | None = None  # None: the groups run in this process

    @property
    def output(self) -> Path:
        assert self.config.output is not None
        return self.config.output


def _constructor_args(plan: _Plan, endpoint: _Endpoint) -> dict[str, Any]:
    """The arguments the environment is constructed with (``@mock`` replaced)."""
    args = {**plan.target.constructor_args, **plan.env_args}
    if endpoint.mock_url is not None:
        args = substitute_mock(args, endpoint.mock_url)
    return args


def _prepare(plan: _Plan, endpoint: _Endpoint) -> Environment[Any, Any]:
    """Construct the environment for this endpoint and apply the run's limits to it."""
    env = _construct(plan.target, _constructor_args(plan, endpoint))
    for name in plan.limits:
        if not hasattr(env, name):
            option = "--" + name.replace("_", "-")
            raise TargetError(f"{option} applies to BaseEnv environments only")
    apply_limits(env, plan.limits)
    return env


def _providers(
    plan: _Plan, endpoint: _Endpoint, env: Environment[Any, Any], console: Console
) -> dict[str, ModelAuth]:
    providers = dict(plan.config.auth_providers)
    injected = injected_auth_names(env)
    if endpoint.mock_url is not None:
        for name in plan.auth_names | injected:
            providers[name] = StaticBearerAuth(MOCK_KEY)
    elif missing := sorted(injected - set(providers)):
        console.print(
            f"[yellow]note:[/] no --auth given for injected credential(s) "
            f"{escape(', '.join(missing))}; calls using them will fail",
            soft_wrap=True,
        )
    return providers


async def _execute(plan: _Plan, console: Console) -> RunReport:
    async with _endpoint(plan.base_url, plan.policy, tokens=plan.config.tokens) as endpoint:
        env = _prepare(plan, endpoint)
        try:
            config = dataclasses.replace(
                plan.config,
                base_url=endpoint.base_url,
                auth_providers=_providers(plan, endpoint, env, console),
            )
            bar, update = progress_bar(console)
            started: list[bool] = []

            def on_progress(progress: Progress) -> None:
                if not started:  # the run is under way: the results file was accepted
                    started.append(True)
                    if endpoint.mock_url is not None:
                        console.print(
                            "[bold yellow]mock model:[/] no --base-url given, so the embedded "
                            f"mock model server answers (policy {escape(plan.mock_policy)}); "
                            "pass --base-url to use a real model",
                            soft_wrap=True,
                        )
                    if plan.ray is not None:
                        console.print(
                            f"[bold]ray:[/] groups run on Ray workers "
                            f"({escape(plan.ray.where)}); starting them...",
                            soft_wrap=True,
                        )
                        if endpoint.mock_url is not None and not plan.ray.starts_local:
                            console.print(
                                "[yellow]note:[/] the embedded mock model listens on "
                                "127.0.0.1 here: workers on other machines cannot reach it",
                                soft_wrap=True,
                            )
                update(progress)

            executor = None
            if plan.ray is not None:
                executor = dataclasses.replace(
                    plan.ray,
                    constructor_args=_constructor_args(plan, endpoint),
                    env_attributes=dict(plan.limits),
                )
            with bar:
                return await run_environment(
                    env, config, on_progress=on_progress, executor=executor
                )
        finally:
            await env.aclose()


def _default_output(target: EnvTarget) -> Path:
    """``runs/<env>-<timestamp>.jsonl``, never an existing file (that would resume it)."""
    stem = f"{target.label}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    return free_path(Path("runs"), stem, ".jsonl")


def free_path(directory: Path, stem: str, suffix: str) -> Path:
    """``directory/stem+suffix``, or ``stem-2``, ``stem-3``... when that already exists."""
    path = directory / f"{stem}{suffix}"
    number = 2
    while path.exists():
        path = directory / f"{stem}-{number}{suffix}"
        number += 1
    return path


def _given(parameter: str) -> bool:
    """Whether ``parameter`` was set on the command line (not left at its default)."""
    source = click.get_current_context().get_parameter_source(parameter)
    return source is ParameterSource.COMMANDLINE


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
    "--temperature",
    type=_Finite(min=0),
    metavar="T",
    help="Sampling temperature sent with every model request.",
)
@click.option(
    "--top-p",
    type=_Finite(min=0, max=1),
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
    type=_Finite(0, 1),
    default=DEFAULT_MAX_FAILURE_SHARE,
    show_default=True,
    help=f"Stop the run (finished groups kept) once at least {MIN_ROLLOUTS} rollouts ran and "
    "more than this share of them ended with one same failure (a misconfiguration); 1 never "
    "stops, 0 stops at the first failure.",
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
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    seed: int | None,
    sampling_arg_pairs: tuple[str, ...],
    tokens: bool,
    no_model_check: bool,
    no_judge_check: bool,
    max_failure_share: float,
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
    replaced per rollout. Exit status 1 when every rollout failed.
    """
    console = Console(stderr=True)
    try:
        plan = _plan(
            target,
            env_arg_pairs=env_arg_pairs,
            auth_pairs=auth_pairs,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            mock_policy=mock_policy,
            mock_policy_given=_given("mock_policy"),
            limits=_given_values(**limit_values),
            model_check=not no_model_check,
            output=output,
            ray=_ray_options(
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
            report = asyncio.run(_execute(plan, console))
    except KeyboardInterrupt:
        _report_interruption(console, plan.output)
        raise SystemExit(signals.exit_status) from None
    except FileNotFoundError as error:
        message = f"data file not found: {error.filename or error}"
        raise click.ClickException(_masked(message, plan)) from None
    except (TargetError, RunError) as error:
        raise click.ClickException(_masked(str(error), plan)) from None
    except Exception as error:
        message = f"run failed: {type(error).__name__}: {error}"
        raise click.ClickException(_masked(message, plan)) from None
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
    if report.rollouts and all(is_failure(reason) for reason in report.rollouts_by_reason):
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(report.rollouts_by_reason.items()))
        raise ChecksFailed(f"every rollout failed ({reasons}): the rewards above are all zeros")


def _has_password(url: str) -> bool:
    """Whether ``url`` carries a credential (``user:PASSWORD@``, or a ``TOKEN@``)."""
    return split_url_credential(url)[1] is not None


def _plan(
    target: str,
    *,
    env_arg_pairs: tuple[str, ...],
    auth_pairs: tuple[str, ...],
    base_url: str | None,
    model: str | None,
    api_key_env: str | None,
    mock_policy: str,
    mock_policy_given: bool,
    limits: dict[str, float | int],
    model_check: bool,
    output: Path | None,
    ray: RayExecutor | None,
    options: dict[str, Any],
) -> _Plan:
    """Resolve the command line into a plan; raises ``TargetError`` with a one-line reason."""
    env_target = load_target(target)
    env_args = parse_env_args(env_arg_pairs)
    auth_vars = auth_variables(auth_pairs)
    if Path(options["base_dir"]).is_file():
        raise TargetError(
            f"--data {options['base_dir']} is a file, not the directory create_dataset reads"
        )
    if not Path(options["base_dir"]).is_dir():
        raise TargetError(f"data directory not found: {options['base_dir']}")
    if base_url is not None and not base_url.strip():
        raise TargetError("--base-url must be a URL such as http://localhost:8000/v1")
    mock = base_url is None
    policy: Any = None
    if mock:
        if api_key_env:
            # The mock takes no key; a key read but unused would not be masked either.
            raise click.UsageError(
                "--api-key-env needs --base-url (the embedded mock model takes no key)"
            )
        policy = load_mock_policy(mock_policy)
        model_auth: ModelAuth = StaticBearerAuth(MOCK_KEY)
        providers: dict[str, ModelAuth] = {}
    else:
        if uses_mock(env_args) or uses_mock(dict(env_target.constructor_args)):
            raise click.UsageError("'@mock' in --env-arg needs the embedded mock (omit --base-url)")
        if mock_policy_given:
            raise click.UsageError("--mock-policy needs the embedded mock (omit --base-url)")
        if model is None:
            raise click.UsageError("--model is required with --base-url")
        if api_key_env and base_url is not None and _has_password(base_url):
            raise click.UsageError(
                "--base-url carries a password and --api-key-env a bearer key, but a request "
                "has one Authorization header, so the endpoint would refuse every rollout: "
                "keep the credential in one of them"
            )
        model_auth = (
            bearer_from_variable(api_key_env, "--api-key-env") if api_key_env else NoModelAuth()
        )
        providers = {
            name: bearer_from_variable(var, f"--auth {name}") for name, var in auth_vars.items()
        }
    try:
        config = RunConfig(
            model=model or MOCK_MODEL,
            base_url=base_url or MOCK_PLACEHOLDER_URL,
            model_auth=model_auth,
            auth_providers=providers,
            output=output or _default_output(env_target),
            constructor_args=env_args,
            env_definition=_bundle_definition(env_target, env_args),
            definition_extras={"mock_policy": mock_policy} if mock else {},
            recorded_base_url=MOCK_URL_MARKER if mock else None,
            **options,
        )
    except ValueError as error:
        raise TargetError(str(error)) from None
    note = None
    if base_url is not None:
        note = _check_endpoint(
            base_url, config.public_base_url, config.model, model_auth, check_model=model_check
        )
    return _Plan(
        target=env_target,
        env_args=env_args,
        config=config,
        base_url=base_url,
        mock_policy=mock_policy,
        policy=policy,
        auth_names=frozenset(auth_vars),
        limits=limits,
        endpoint_note=note,
        ray=None if ray is None else _with_bundle(ray, target, env_target),
    )


def _ray_options(
    use_ray: bool, *, address: str | None, workers: int | None, worker_concurrency: int
) -> RayExecutor | None:
    """The ``--ray-*`` options when ``--ray`` is given; raises ``TargetError`` for a ``--ray-*``
    option without ``--ray`` or when Ray is not installed."""
    if not use_ray:
        for name in ("ray_address", "ray_workers", "ray_worker_concurrency"):
            if _given(name):
                raise click.UsageError(f"--{name.replace('_', '-')} needs --ray")
        return None
    if address is not None and not address.strip():
        raise click.UsageError("--ray-address must be auto, ray://HOST:PORT or HOST:PORT")
    executor = RayExecutor(address=address, workers=workers, worker_concurrency=worker_concurrency)
    try:
        executor.check_installed()
    except ExecutorError as error:
        raise TargetError(str(error)) from None
    return executor


def _with_bundle(executor: RayExecutor, target: str, env_target: EnvTarget) -> RayExecutor:
    """The bundle the workers load: the bundle file itself, or what ``benchmax bundle``
    makes of the class (the run's constructor arguments travel separately)."""
    from benchmax.bundle import BundlingError, read_bundle

    try:
        if env_target.bundle_digest is not None:
            bundle = read_bundle(target)
        else:
            bundle, _modules = bundle_class_target(env_target, {}, ())
    except (BundlingError, OSError) as error:
        raise TargetError(f"cannot bundle {target} for the Ray workers: {error}") from None
    return dataclasses.replace(executor, bundle=bundle)


def _masked(text: str, plan: _Plan) -> str:
    """``text`` with every credential of the run replaced by ``***``."""
    return mask_secrets(text, plan.config.secrets())


def _bundle_definition(target: EnvTarget, env_args: dict[str, Any]) -> dict[str, Any] | None:
    """How the results header names an environment from a bundle: its digest (and the
    ``--env-arg`` overrides). ``None`` for a class target: the runner records its class
    path, ``constructor_args`` and source digest, as ``run_environment`` does."""
    if target.bundle_digest is None:
        return None
    definition: dict[str, Any] = {"bundle_digest": target.bundle_digest}
    if env_args:
        definition["constructor_args"] = env_args
    return definition


def _given_values(**values: Any) -> dict[str, Any]:
    """The keyword arguments that are not ``None``."""
    return {name: value for name, value in values.items() if value is not None}


def parse_sampling_args(
    pairs: tuple[str, ...], named: dict[str, Any], *, seed_given: bool = False
) -> dict[str, Any]:
    """``--temperature``-style values plus ``--sampling-arg KEY=VALUE`` pairs (each value
    parsed as JSON, else kept as a string); raises ``TargetError`` for a malformed pair, a
    key given twice (``seed`` counts ``--seed`` when ``seed_given``), or a key the chat
    loop sets itself (model, messages, tools)."""
    args = dict(named)
    for pair in pairs:
        key, equals, raw = pair.partition("=")
        key = key.strip()
        if not equals or not key or any(c.isspace() for c in key):
            raise TargetError(f"invalid --sampling-arg {pair!r}: expected KEY=VALUE")
        if key in RESERVED_BODY_KEYS:
            raise TargetError(
                f"--sampling-arg cannot set {key!r}: the chat loop sets it "
                "(use --model for the model)"
            )
        if key == "seed" and seed_given:
            raise TargetError(
                "--seed and --sampling-arg seed both set the seed: --seed N gives every "
                "rollout its own seed, --sampling-arg seed=N sends N with every request; "
                "use one"
            )
        if key in named:
            option = "--" + key.replace("_", "-")
            raise TargetError(f"{option} and --sampling-arg {key} both set {key!r}: use one")
        if key in args:
            raise TargetError(f"--sampling-arg {key!r} is given twice")
        try:
            args[key] = json.loads(raw, parse_constant=_refuse_constant)
        except ValueError:
            args[key] = raw
    return args


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


def _report_interruption(console: Console, output: Path) -> None:
    if not output.exists():
        console.print("[bold red]interrupted[/] before the run started; nothing was saved")
        return
    try:
        saved = len({r.example_index for r in read_results(output).rollouts})
    except (OSError, RunError):
        saved = 0
    console.print(
        f"[bold red]interrupted:[/] {saved} complete group(s) saved in {escape(str(output))}; "
        f"run the same command with -o {escape(str(output))} to resume",
        soft_wrap=True,
    )
