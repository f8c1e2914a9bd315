"""``benchmax serve``: serve an environment over OpenEnv or NeMo-Gym on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._credentials import (
    MOCK_KEY,
    auth_variables,
    bearer_from_variable,
    injected_auth_names,
)
from benchmax.cli._options import (
    auth_option,
    data_option,
    env_arg_option,
    listen_options,
    mock_policy_option,
)
from benchmax.cli._scoring_env import embedded_mock_url
from benchmax.cli._targets import (
    EnvTarget,
    TargetError,
    load_target,
    parse_env_args,
    substitute_mock,
    uses_mock,
)

if TYPE_CHECKING:
    from benchmax.serving import ServeOptions

__all__ = ["serve_command"]


class _Timeout(click.ParamType):  # type: ignore[type-arg]
    """Seconds (a positive finite number), or ``none`` where ``allow_none``."""

    name = "seconds"

    def __init__(self, *, allow_none: bool = True) -> None:
        self.allow_none = allow_none

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, float):
            return value
        if self.allow_none and str(value).strip().lower() == "none":
            return None
        try:
            seconds = float(value)
        except ValueError:
            expected = "a number of seconds or 'none'" if self.allow_none else "a number of seconds"
            self.fail(f"{value!r} is not {expected}", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r} is not a positive number of seconds", param, ctx)
        return seconds


@click.command("serve")
@click.argument("target")
@click.option(
    "--protocol",
    type=click.Choice(["openenv", "nemo-gym"]),
    required=True,
    help="openenv: an OpenEnv environment server (HTTP, WebSocket /ws, MCP /mcp); "
    "nemo-gym: a NeMo-Gym resources server.",
)
@data_option()
@env_arg_option(
    "Constructor argument (value parsed as JSON, else kept as a string); '@mock' stands "
    "for an embedded mock model's URL (a judge or simulated user offline). Repeatable."
)
@auth_option()
@click.option(
    "--split",
    type=click.Choice(["train", "eval"]),
    default="train",
    show_default=True,
    help="Dataset split whose examples the episodes use.",
)
@listen_options()
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Sessions live at once (WebSocket connections, HTTP episodes, MCP sessions); "
    "past it a WebSocket gets CAPACITY_REACHED.",
)
@click.option(
    "--session-timeout",
    type=_Timeout(),
    default=600.0,
    show_default=True,
    help="Seconds a session may stay idle before it is closed ('none': never).",
)
@click.option(
    "--header-timeout",
    type=_Timeout(allow_none=False),
    default=60.0,
    show_default=True,
    help="Seconds a connection may take to send a request's headers (from when it opened "
    "or its last reply; an idle keep-alive connection closes then too).",
)
@click.option(
    "--body-timeout",
    type=_Timeout(allow_none=False),
    default=60.0,
    show_default=True,
    help="Seconds between two reads of a request body before it is dropped (HTTP 408).",
)
@click.option(
    "--write-timeout",
    type=_Timeout(allow_none=False),
    default=30.0,
    show_default=True,
    help="Seconds a WebSocket message may wait for a client that does not read before "
    "its connection is cut.",
)
@mock_policy_option("echo")
def serve_command(
    target: str,
    protocol: str,
    data_dir: Path,
    env_arg_pairs: tuple[str, ...],
    auth_pairs: tuple[str, ...],
    split: str,
    host: str,
    port: int,
    max_sessions: int,
    session_timeout: float | None,
    header_timeout: float,
    body_timeout: float,
    write_timeout: float,
    mock_policy: str,
) -> None:
    """Serve TARGET's examples to a trainer: every episode is a benchmax rollout whose
    model is the client (OpenEnv: /reset, /step, /ws; NeMo-Gym: /seed_session, /verify).
    Runs until interrupted."""
    from benchmax.serving import ServeOptions

    try:
        env_target = load_target(target)
        env_args = {**env_target.constructor_args, **parse_env_args(env_arg_pairs)}
        providers: dict[str, ModelAuth] = {
            name: bearer_from_variable(variable, f"--auth {name}")
            for name, variable in auth_variables(auth_pairs).items()
        }
        if not data_dir.is_dir():
            raise TargetError(f"data directory not found: {data_dir}")
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    try:
        options = ServeOptions(
            protocol="nemo-gym" if protocol == "nemo-gym" else "openenv",
            host=host,
            port=port,
            split="eval" if split == "eval" else "train",
            base_dir=data_dir,
            max_sessions=max_sessions,
            session_timeout=session_timeout,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            write_timeout=write_timeout,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    try:
        asyncio.run(_serve(env_target, env_args, providers, options, mock_policy))
    except KeyboardInterrupt:
        pass
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"cannot serve on {host}:{port}: {error}") from None


def _collect_less() -> None:
    """Thousands of live sessions hold many objects: keep what start-up built out of the
    collector's scans, and collect the youngest generation less often, so collections do
    not pause the event loop every few steps."""
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


async def _serve(
    target: EnvTarget,
    env_args: dict[str, Any],
    providers: dict[str, ModelAuth],
    options: ServeOptions,
    mock_policy: str,
) -> None:
    import dataclasses

    from benchmax.serving import SplitError, serving

    mock = uses_mock(env_args)
    async with embedded_mock_url(mock, mock_policy) as mock_url:
        args = substitute_mock(env_args, mock_url) if mock_url is not None else env_args
        env = target.construct(args)
        try:
            if mock:
                for name in injected_auth_names(env) | set(providers):
                    providers[name] = StaticBearerAuth(MOCK_KEY)
            elif missing := sorted(injected_auth_names(env) - set(providers)):
                click.echo(
                    f"note: no --auth given for injected credential(s) {', '.join(missing)}; "
                    "calls using them will fail",
                    err=True,
                )
            options = dataclasses.replace(options, auth_providers=providers)
            async with contextlib.AsyncExitStack() as stack:
                try:
                    server = await stack.enter_async_context(serving(env, options))
                except SplitError as error:
                    raise TargetError(
                        f"cannot serve {target.label}'s {options.split} split from "
                        f"{options.base_dir}: {error}"
                    ) from error
                click.echo(
                    f"benchmax serve: {target.label} ({options.protocol}, {options.split} "
                    f"split, {len(server.sessions.examples)} examples) on {server.base_url}",
                    err=True,
                )
                click.echo("press Ctrl-C to stop", err=True)
                _collect_less()
                await asyncio.Event().wait()
        finally:
            await env.aclose()
