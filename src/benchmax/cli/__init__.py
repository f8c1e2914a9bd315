"""The ``benchmax`` command line: ``run``, ``bundle``, ``inspect`` and ``mock-serve``.

This is the only module that imports the CLI libraries (click, rich).
"""

from __future__ import annotations

import asyncio

import click

import benchmax
from benchmax.cli._bundle_commands import bundle_command, inspect_command
from benchmax.cli._run_command import load_mock_policy, run_command
from benchmax.cli._targets import TargetError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(benchmax.__version__, prog_name="benchmax")
def cli() -> None:
    """Run, bundle and inspect benchmax environments on this machine."""


@cli.command("mock-serve")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port on 127.0.0.1 (0 picks a free one).",
)
@click.option(
    "--mock-policy",
    default="echo",
    show_default=True,
    help="echo, tool_exerciser, module:function or file.py:function.",
)
def mock_serve_command(port: int, mock_policy: str) -> None:
    """Serve the mock OpenAI-compatible model on 127.0.0.1 until interrupted."""
    from benchmax.testing import MockModelServer

    try:
        policy = load_mock_policy(mock_policy)
    except TargetError as error:
        raise click.ClickException(str(error)) from None

    async def serve() -> None:
        async with MockModelServer(policy, port=port, record=False) as server:
            click.echo(f"mock model server listening on {server.base_url} (policy {mock_policy})")
            click.echo("press Ctrl-C to stop")
            await server.serve_forever()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    except OSError as error:
        raise click.ClickException(f"cannot serve on 127.0.0.1:{port}: {error}") from None


cli.add_command(run_command)
cli.add_command(bundle_command)
cli.add_command(inspect_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="benchmax")
