"""``benchmax capture --upstream URL``: the capture endpoint alone, for a program you run
yourself. It opens ``--sessions`` sessions, prints how to point a program at each (base
URL, API key, model), writes every captured call to ``--output`` as a JSON line, and serves
until Ctrl-C or SIGTERM. The upstream's key (``--api-key-env``) is never printed."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import click

from benchmax.cli._credentials import bearer_from_variable
from benchmax.cli._options import api_key_env_option, listen_options
from benchmax.cli._signals import terminate_like_interrupt
from benchmax.cli._targets import TargetError

__all__ = ["capture_command"]


@click.command("capture")
@click.option(
    "--upstream",
    required=True,
    metavar="URL",
    help="OpenAI-compatible server that gives token ids (vLLM, SGLang, benchmax serve-model).",
)
@api_key_env_option()
@click.option("--model", default=None, help="The only model name programs may call (default: any).")
@click.option(
    "--sessions",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="How many sessions (base URL + API key pairs) to open.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=(
        "Write each captured call to this JSON Lines file, appended to what it holds"
        " (session, tokens, request, reply)."
    ),
)
@listen_options()
@click.option(
    "--advertise-host",
    metavar="HOST",
    default=None,
    help="Host named in the printed base URLs instead of --host, for programs that reach"
    " this machine by another name (a Docker container: host.docker.internal, or the bridge"
    " gateway); required with --host 0.0.0.0 or ::. Listening beyond 127.0.0.1 exposes the"
    " endpoint: the session keys guard it.",
)
def capture_command(
    upstream: str,
    api_key_env: str | None,
    model: str | None,
    sessions: int,
    output: Path | None,
    host: str,
    port: int,
    advertise_host: str | None,
) -> None:
    """Run the capture endpoint in front of UPSTREAM until interrupted.

    Each session prints OPENAI_BASE_URL, OPENAI_API_KEY (and OPENAI_MODEL with --model)
    for a program;
    every call it makes is asked of the upstream with token ids and logprobs and written
    to --output. A program that cannot change its path may use the endpoint's /v1 with
    its session's key.
    """
    from benchmax.runner import NoModelAuth

    _check_listen_values(upstream, model, host, advertise_host)
    try:
        auth = bearer_from_variable(api_key_env, "--api-key-env") if api_key_env else NoModelAuth()
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    try:
        sink = output.open("a", encoding="utf-8") if output is not None else None
    except OSError as error:
        raise click.ClickException(
            f"cannot write --output {output}: {error.strerror or error}"
        ) from None
    try:
        with terminate_like_interrupt():
            asyncio.run(_serve(upstream, auth, model, sessions, sink, (host, port, advertise_host)))
    except KeyboardInterrupt:
        pass
    finally:
        if sink is not None:
            sink.close()


def _check_listen_values(
    upstream: str, model: str | None, host: str, advertise_host: str | None
) -> None:
    """``click.BadParameter`` (exit status 2) for an upstream that is no http(s) URL, an
    empty ``--model``, or a wildcard ``--host`` without ``--advertise-host``."""
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(
            f"--upstream must be an http:// or https:// URL with a host, got {upstream!r}",
            param_hint="--upstream",
        )
    if model is not None and not model.strip():
        raise click.BadParameter("--model must not be empty", param_hint="--model")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        wildcard = ipaddress.ip_address(bare).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard and advertise_host is None:
        raise click.BadParameter(
            f"--host {host} listens on every interface but is no address a program can call:"
            " add --advertise-host HOST, the host programs reach this machine by (such as"
            " host.docker.internal, or the docker bridge gateway 172.17.0.1)",
            param_hint="--host",
        )


async def _serve(
    upstream: str,
    auth: Any,
    model: str | None,
    sessions: int,
    sink: IO[str] | None,
    listen: tuple[str, int, str | None],
) -> None:
    """Serve until cancelled; ``listen`` is (host, port, advertised host)."""
    from benchmax.capture import CapturedCall, CaptureEndpoint, CaptureSession

    def write(session: CaptureSession, call: CapturedCall) -> None:
        if sink is None:
            return
        line = {
            "session": session.rollout_id,
            "weights_version": call.weights_version,
            "streamed": call.streamed,
            "model_call": call.model_call().to_json(),
            "request": call.request,
            "reply": call.message,
        }
        sink.write(json.dumps(line) + "\n")
        sink.flush()

    host, port, advertised = listen
    try:
        endpoint = CaptureEndpoint(host=host, port=port, advertised_host=advertised, on_call=write)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--advertise-host") from None
    try:
        await endpoint.start()
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error}") from None
    try:
        listening = "" if advertised is None else f" (listening on {host})"
        click.echo(f"capture endpoint on {endpoint.origin}{listening}, in front of {upstream}")
        for number in range(1, sessions + 1):
            session = endpoint.open_session(
                rollout_id=f"s{number}", model=model, upstream_url=upstream, upstream_auth=auth
            )
            click.echo(f"session {session.rollout_id}:")
            click.echo(f"  export OPENAI_BASE_URL={session.base_url}")
            click.echo(f"  export OPENAI_API_KEY={session.api_key}")
            if model is not None:
                click.echo(f"  export OPENAI_MODEL={model}")
        click.echo("press Ctrl-C to stop", err=True)
        await asyncio.Event().wait()
    finally:
        await endpoint.stop()
