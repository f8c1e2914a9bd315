"""The ``benchmax`` command line: ``run``, ``train``, ``view``, ``bundle`` and the rest.

This package is the only place that imports the CLI libraries (click, rich). Every error
is reported as one line, ``Error: ...`` (an error with ``detail`` follows it with indented
lines); the exit statuses are ``_exit_codes``'s (0 done, 1 checks failed, 2 usage error,
3 configuration or endpoint error, 4 an untrustworthy run, 130/143 interrupted).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import click

import benchmax
from benchmax._secret_masking import mask_standard_streams, masked_output
from benchmax.cli._bundle_commands import bundle_command, inspect_command
from benchmax.cli._capture_command import capture_command
from benchmax.cli._compare_command import compare_command
from benchmax.cli._errors import CLIError
from benchmax.cli._exit_codes import ChecksFailed, exit_code_of
from benchmax.cli._generate_qa_command import generate_qa_command
from benchmax.cli._init_command import init_command
from benchmax.cli._mock_policy import load_mock_policy
from benchmax.cli._options import mock_policy_option
from benchmax.cli._rescore_command import rescore_command
from benchmax.cli._results_commands import view_command
from benchmax.cli._run_command import run_command
from benchmax.cli._safe_text import terminal_safe
from benchmax.cli._serve_command import serve_command
from benchmax.cli._serve_model_command import serve_model_command
from benchmax.cli._show_command import show_command
from benchmax.cli._signals import TerminationSignals, terminate_like_interrupt
from benchmax.cli._targets import TargetError
from benchmax.cli._traces_command import traces_command
from benchmax.cli._train_command import train_command
from benchmax.cli._validate_command import validate_command

__all__ = ["cli", "main"]


def error_line(error: click.ClickException) -> str:
    """The error as a single line (whitespace runs, newlines included, become one space;
    terminal control characters are shown escaped)."""
    text = terminal_safe(re.sub(r"\s+", " ", error.format_message()).strip())
    if isinstance(error, click.UsageError) and error.ctx is not None:
        text += f" (see '{error.ctx.command_path} --help')"
    return text


# click >= 8.2 raises this for a group called without a command (it shows the help).
_NO_ARGS_IS_HELP: tuple[type[Exception], ...] = tuple(
    getattr(click.exceptions, name)
    for name in ("NoArgsIsHelpError",)
    if hasattr(click.exceptions, name)
)


_OPTION_ALIASES = {
    "--rollouts": "--group-size",
    "--num-rollouts": "--group-size",
    "--n-rollouts": "--group-size",
    "--samples": "--group-size",
    "--num-samples": "--group-size",
    "--num-generations": "--group-size",
    "--num-examples": "--max-examples",
    "--examples": "--max-examples",
    "--endpoint": "--base-url",
    "--api-base": "--base-url",
    "--api-key": "--api-key-env",
    "--workers": "--concurrency",
    "--max-concurrency": "--concurrency",
    "--parallel": "--concurrency",
    "--temp": "--temperature",
    "--timeout": "--model-timeout",
    "--retries": "--model-retries",
    "--max-retries": "--model-retries",
    "--retry": "--retry-failed",
    "--retry-errors": "--retry-failed",
}
"""Options people carry over from other tools, and the option that does that here: click
suggests by spelling alone (``--rollouts`` -> ``--rollout-timeout``); this table wins
when the command has the option it names."""


class _MeantOption(click.NoSuchOption, CLIError):
    """An unknown option, with the option the alias table says was meant."""

    def __init__(self, error: click.NoSuchOption, meant: str) -> None:
        super().__init__(error.option_name, ctx=error.ctx)
        self.meant = meant

    def format_message(self) -> str:
        return f"{self.message} Did you mean '{self.meant}'?"


def _suggest_meant_option(error: click.NoSuchOption) -> click.NoSuchOption:
    """``error`` with the alias table's suggestion instead of click's spelling-based one,
    when the table has one for its option and the command offers it (shown with its short
    form: ``-k/--group-size``); else ``error``."""
    meant = _OPTION_ALIASES.get(error.option_name)
    if meant is None or error.ctx is None:
        return error
    for param in error.ctx.command.params:
        if isinstance(param, click.Option) and meant in param.opts:
            return _MeantOption(error, "/".join(sorted(param.opts, key=len)))
    return error


class _OneLineErrors(click.Group):
    """A group that reports every click error, usage errors included, as one line."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        # Every credential a command resolves is masked in all it prints (user code's
        # prints, log records and tracebacks included).
        with masked_output():
            return self._main(args, prog_name, complete_var, standalone_mode, **extra)

    def _main(
        self,
        args: Sequence[str] | None,
        prog_name: str | None,
        complete_var: str | None,
        standalone_mode: bool,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        # SIGTERM ends a command as Ctrl-C does (KeyboardInterrupt, click's Abort), with
        # 143 instead of 130; run and train install their own handling inside.
        signals = TerminationSignals()
        try:
            with terminate_like_interrupt(signals, watchdog=False):
                result = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as error:
            if isinstance(error, _NO_ARGS_IS_HELP):  # bare ``benchmax``: the help, as usual
                error.show()
                sys.exit(error.exit_code)
            if isinstance(error, click.NoSuchOption):
                error = _suggest_meant_option(error)
            if not (isinstance(error, ChecksFailed) and error.reported):
                click.echo(f"Error: {error_line(error)}", err=True)
            for line in getattr(error, "detail", ()):
                click.echo(f"  {terminal_safe(' '.join(str(line).split()))}", err=True)
            sys.exit(exit_code_of(error))
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(signals.exit_status)
        except OSError as error:  # output piped into a command that stopped reading
            if error.errno != errno.EPIPE:
                raise
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(benchmax.__version__, prog_name="benchmax")
def cli() -> None:
    """Run, bundle and inspect benchmax environments on this machine.

    Start with: benchmax run path/to/env.py:MyEnv --data DIR (an embedded mock model
    answers unless --base-url is given). Every command has --help.
    """


@cli.command("mock-serve")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port on 127.0.0.1 (0 picks a free one).",
)
@mock_policy_option("echo")
@click.option(
    "--tokens",
    is_flag=True,
    help="Token mode: vLLM-shaped replies with a toy tokenizer's prompt ids, completion "
    "ids and logprobs when a request asks (return_token_ids, logprobs).",
)
@click.option(
    "--chat-template",
    type=click.Choice(["chatml", "qwen3"]),
    default="chatml",
    show_default=True,
    help="Token mode's template; qwen3 drops reasoning before the last user message.",
)
@click.pass_context
def mock_serve_command(
    context: click.Context, port: int, mock_policy: str, tokens: bool, chat_template: str
) -> None:
    """Serve the mock OpenAI-compatible model on 127.0.0.1 until interrupted."""
    from benchmax.testing import MockModelServer

    given = context.get_parameter_source("chat_template") is click.core.ParameterSource.COMMANDLINE
    if given and not tokens:
        raise click.UsageError("--chat-template is the token mode's template: add --tokens")
    try:
        policy = load_mock_policy(mock_policy)
    except TargetError as error:
        raise click.ClickException(str(error)) from None

    async def serve() -> None:
        server = MockModelServer(
            policy,
            port=port,
            record=False,
            tokens=tokens,
            chat_template="qwen3" if chat_template == "qwen3" else "chatml",
        )
        async with server:
            mode = f", token mode, template {chat_template}" if tokens else ""
            click.echo(
                f"mock model server listening on {server.base_url} (policy {mock_policy}{mode})"
            )
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
cli.add_command(validate_command)
cli.add_command(generate_qa_command)
cli.add_command(traces_command)
cli.add_command(init_command)
cli.add_command(view_command)
cli.add_command(show_command)
cli.add_command(rescore_command)
cli.add_command(compare_command)
cli.add_command(serve_command)
cli.add_command(serve_model_command)
cli.add_command(train_command)
cli.add_command(capture_command)


def main() -> None:
    """Console-script entry point. The standard streams stay masked to the end, so the
    traceback of an unexpected error does not show a credential either."""
    mask_standard_streams()
    cli(prog_name="benchmax")
