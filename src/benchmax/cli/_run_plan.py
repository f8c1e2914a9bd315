"""What ``benchmax run`` resolves from its command line before anything starts: the
``Plan`` (target, endpoint, credentials, run configuration, Ray executor)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from benchmax._url_credentials import split_url_credential
from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._bundle_commands import bundle_class_target
from benchmax.cli._credentials import MOCK_KEY, auth_variables, bearer_from_variable
from benchmax.cli._endpoint_check import check_endpoint
from benchmax.cli._mock_policy import MOCK_MODEL, load_mock_policy
from benchmax.cli._output_paths import free_path
from benchmax.cli._targets import (
    MOCK_URL_MARKER,
    EnvTarget,
    TargetError,
    load_target,
    parse_env_args,
    uses_mock,
)
from benchmax.runner import ExecutorError, NoModelAuth, RayExecutor, RunConfig

__all__ = ["Plan", "bundle_definition", "given", "plan_run", "ray_options"]

MOCK_PLACEHOLDER_URL = "http://mock.invalid/v1"  # replaced by the server's URL once it listens


@dataclass(frozen=True, slots=True)
class Plan:
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


def plan_run(
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
) -> Plan:
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
            env_definition=bundle_definition(env_target, env_args),
            definition_extras={"mock_policy": mock_policy} if mock else {},
            recorded_base_url=MOCK_URL_MARKER if mock else None,
            **options,
        )
    except ValueError as error:
        raise TargetError(str(error)) from None
    note = None
    if base_url is not None:
        note = check_endpoint(
            base_url, config.public_base_url, config.model, model_auth, check_model=model_check
        )
    return Plan(
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


def _has_password(url: str) -> bool:
    """Whether ``url`` carries a credential (``user:PASSWORD@``, or a ``TOKEN@``)."""
    return split_url_credential(url)[1] is not None


def ray_options(
    use_ray: bool, *, address: str | None, workers: int | None, worker_concurrency: int
) -> RayExecutor | None:
    """The ``--ray-*`` options when ``--ray`` is given; raises ``TargetError`` for a ``--ray-*``
    option without ``--ray`` or when Ray is not installed."""
    if not use_ray:
        for name in ("ray_address", "ray_workers", "ray_worker_concurrency"):
            if given(name):
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


def given(parameter: str) -> bool:
    """Whether ``parameter`` was set on the command line (not left at its default)."""
    source = click.get_current_context().get_parameter_source(parameter)
    return source is ParameterSource.COMMANDLINE


def _default_output(target: EnvTarget) -> Path:
    """``runs/<env>-<timestamp>.jsonl``, never an existing file (that would resume it)."""
    stem = f"{target.label}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    return free_path(Path("runs"), stem, ".jsonl")


def bundle_definition(target: EnvTarget, env_args: dict[str, Any]) -> dict[str, Any] | None:
    """How the results header names an environment from a bundle: its digest (and the
    ``--env-arg`` overrides). ``None`` for a class target: the runner records its class
    path, ``constructor_args`` and source digest, as ``run_environment`` does."""
    if target.bundle_digest is None:
        return None
    definition: dict[str, Any] = {"bundle_digest": target.bundle_digest}
    if env_args:
        definition["constructor_args"] = env_args
    return definition
