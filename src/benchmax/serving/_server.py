"""``serve``: run one environment's split as an OpenEnv or NeMo-Gym server."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import resource
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmax._secret_masking import MaskedRecords, credential_secrets, remembered
from benchmax._value_checks import is_finite_number, is_int_at_least
from benchmax.auth import ModelAuth, bind_model_auth
from benchmax.envs import Environment
from benchmax.serving._bridge import PolicyBridge
from benchmax.serving._errors import ServingError
from benchmax.serving._sessions import Sessions
from benchmax.serving._wire import Wire

__all__ = [
    "PROTOCOLS",
    "Protocol",
    "RunningServer",
    "ServeOptions",
    "SplitError",
    "serve",
    "serving",
]

logger = logging.getLogger("benchmax.serving")

_LINGERING_SECONDS = 2.0

type Protocol = Literal["openenv", "nemo-gym"]
PROTOCOLS: tuple[Protocol, ...] = ("openenv", "nemo-gym")


class SplitError(ServingError):
    """The split to serve could not be loaded (``create_dataset`` raised) or is empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """How a split is served.

    ``protocol`` is ``openenv`` or ``nemo-gym``; ``host`` and ``port`` where it listens
    (``127.0.0.1`` by default; port 0 picks a free one); ``split`` and ``base_dir`` the
    examples (``create_dataset(split, base_dir)``); ``max_sessions`` the sessions live
    at once (WebSocket connections, HTTP episodes, MCP sessions); ``session_timeout``
    the seconds a session may stay idle before it is closed (``None``: never);
    ``auth_providers`` the credentials bound for ``InjectedAuth`` (a judge, a simulated
    user), masked as ``***`` in everything the server sends.

    Slow clients: ``header_timeout`` is the most seconds a connection may take to send a
    request's headers, counted from when it opened or its last reply (nginx's
    ``client_header_timeout``; an idle keep-alive connection closes after it too);
    ``body_timeout`` the most seconds between two reads of a request body (nginx's
    ``client_body_timeout``: HTTP 408 and the connection closed); ``write_timeout`` the
    most seconds one WebSocket message may wait for a client that does not read (its
    connection is then cut). Raises ``ValueError`` naming a bad value.
    """

    protocol: Protocol = "openenv"
    host: str = "127.0.0.1"
    port: int = 8000
    split: Literal["train", "eval"] = "train"
    base_dir: Path = Path(".")
    max_sessions: int = 1024
    session_timeout: float | None = 600.0
    auth_providers: Mapping[str, ModelAuth] | None = None
    header_timeout: float = 60.0
    body_timeout: float = 60.0
    write_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}")
        if not is_int_at_least(self.port, 0) or self.port > 65535:
            raise ValueError("port must be an integer from 0 to 65535")
        if self.split not in ("train", "eval"):
            raise ValueError("split must be 'train' or 'eval'")
        if not is_int_at_least(self.max_sessions, 1):
            raise ValueError("max_sessions must be a positive integer")
        timeout = self.session_timeout
        if timeout is not None and not (is_finite_number(timeout) and timeout > 0):
            raise ValueError("session_timeout must be a positive number of seconds or None")
        for name in ("header_timeout", "body_timeout", "write_timeout"):
            value = getattr(self, name)
            if not (is_finite_number(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds")


@dataclass(frozen=True, slots=True)
class RunningServer:
    """A server that listens: its ``base_url`` and live ``sessions``."""

    base_url: str
    sessions: Sessions


async def _other_split_hint(env: Environment[Any, Any], options: ServeOptions) -> str:
    """``"; --split eval serves the eval split"`` when the split missing is ``train`` and
    ``eval`` loads with examples, else ``""``."""
    if options.split != "train":
        return ""
    try:
        eval_examples = await env.create_dataset("eval", Path(options.base_dir))
        if not list(eval_examples):
            return ""
    except Exception:  # only a hint: the error reported is the train split's
        return ""
    return "; --split eval serves the eval split"


@contextlib.asynccontextmanager
async def serving(
    env: Environment[Any, Any], options: ServeOptions
) -> AsyncIterator[RunningServer]:
    """Serve ``env`` while the block runs; every session is closed when it ends.

    Loads the split first (``SplitError`` when ``create_dataset`` raises or the split is
    empty, with the cause chained); raises ``OSError`` when the address cannot be bound.
    """
    from aiohttp import web

    from benchmax.serving._mcp import McpHandler

    _raise_open_file_limit()
    try:
        examples = list(await env.create_dataset(options.split, Path(options.base_dir)))
    except FileNotFoundError as error:
        raise SplitError(
            f"its data file {error.filename or error} does not exist"
            + await _other_split_hint(env, options)
        ) from error
    except Exception as error:
        raise SplitError(f"{type(error).__name__}: {error}") from error
    if not examples:
        raise SplitError(f"the {options.split} split under {options.base_dir} has no examples")
    providers = dict(options.auth_providers or {})
    with bind_model_auth(providers):
        context = contextvars.copy_context()
    secrets = credential_secrets(providers.values(), None, warn=False)
    wire = Wire(
        MaskedRecords((*secrets, *remembered())),
        body_timeout=options.body_timeout,
        write_timeout=options.write_timeout,
    )
    async with PolicyBridge() as bridge:
        sessions = Sessions(
            env,
            examples,
            bridge,
            split=options.split,
            max_sessions=options.max_sessions,
            session_timeout=options.session_timeout,
            context=context,
            wire=wire,
        )
        app = web.Application(client_max_size=wire.max_body_bytes)
        if options.protocol == "openenv":
            from benchmax.serving._openenv import OpenEnvRoutes

            OpenEnvRoutes(sessions, McpHandler(sessions)).add_to(app)
        else:
            from benchmax.serving._nemo_gym import NemoGymRoutes

            NemoGymRoutes(sessions).add_to(app)
        # handler_cancellation: a client that goes away mid-step cancels the step (and
        # closes its episode) instead of leaving the rollout to wait for it.
        # keepalive_timeout: aiohttp closes a connection still waiting for a request's
        # headers that long after it opened or after its last reply (the header timeout).
        # lingering_time: after a 408 the rest of a body is read for at most that long.
        runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            handler_cancellation=True,
            shutdown_timeout=5.0,
            keepalive_timeout=options.header_timeout,
            lingering_time=_LINGERING_SECONDS,
        )
        await runner.setup()
        reaper = asyncio.create_task(sessions.reap_forever(), name="benchmax-serve-reaper")
        try:
            site = web.TCPSite(runner, options.host, options.port, backlog=4096)
            await site.start()
            port = runner.addresses[0][1]
            host = options.host if ":" not in options.host else f"[{options.host}]"
            yield RunningServer(base_url=f"http://{host}:{port}", sessions=sessions)
        finally:
            reaper.cancel()
            await asyncio.gather(reaper, return_exceptions=True)
            await sessions.aclose()
            await runner.cleanup()


async def serve(env: Environment[Any, Any], options: ServeOptions) -> None:
    """Serve ``env`` until cancelled (see :func:`serving`)."""
    async with serving(env, options):
        await asyncio.Event().wait()


def _raise_open_file_limit() -> None:
    """Every session holds sockets (its connection, a parked model call): allow as many
    open files as the hard limit lets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
