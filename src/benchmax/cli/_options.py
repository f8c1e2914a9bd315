"""Command-line options several commands share, declared once so they parse, and read in
``--help``, the same everywhere: ``--data``, ``--env-arg``, ``--auth``, ``--api-key-env``,
``--mock-policy``, ``--model``, ``--base-url``, ``--concurrency``, ``--json``,
``-o/--output``, and the data commands' ``--eval-fraction`` and ``--seed``. One option
name means one thing in every command (a test checks it)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

__all__ = [
    "BASE_URL_HELP",
    "CONCURRENCY_HELP",
    "JSON_HELP",
    "MOCK_POLICY_HELP",
    "MODEL_HELP",
    "api_key_env_option",
    "auth_option",
    "base_url_option",
    "concurrency_option",
    "data_option",
    "env_arg_option",
    "eval_fraction_option",
    "group_size_option",
    "listen_options",
    "json_option",
    "max_examples_option",
    "mock_policy_option",
    "model_option",
    "output_option",
    "renamed_option",
    "seed_option",
    "FiniteRange",
]


class FiniteRange(click.FloatRange):
    """A float range that refuses ``nan`` (which every range comparison lets through)
    and ``inf``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


type _Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def data_option(
    text: str = "Data directory passed to create_dataset as base_dir.",
    *,
    default: Path | None = Path("."),
) -> _Decorator:
    """``--data DIR`` (default ``.``, or ``default``), passed to the command as ``data_dir``."""
    return click.option(
        "--data",
        "data_dir",
        metavar="DIR",
        type=click.Path(path_type=Path),
        default=default,
        show_default=default is not None,
        help=text,
    )


def env_arg_option(text: str) -> _Decorator:
    """``--env-arg KEY=VALUE`` (repeatable), passed as ``env_arg_pairs``."""
    return click.option("--env-arg", "env_arg_pairs", multiple=True, metavar="KEY=VALUE", help=text)


def auth_option(
    text: str = "Bind InjectedAuth(NAME) to the bearer key in variable VAR. Repeatable.",
) -> _Decorator:
    """``--auth NAME=VAR`` (repeatable), passed as ``auth_pairs``."""
    return click.option("--auth", "auth_pairs", multiple=True, metavar="NAME=VAR", help=text)


def api_key_env_option() -> _Decorator:
    """``--api-key-env VAR``: the variable holding the model endpoint's bearer key."""
    return click.option(
        "--api-key-env", metavar="VAR", help="Environment variable holding the bearer key."
    )


def listen_options() -> _Decorator:
    """``--host`` (default 127.0.0.1) and ``--port`` (default 8000; 0 picks a free one):
    where a server command listens."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option(
            "--port",
            type=click.IntRange(0, 65535),
            default=8000,
            show_default=True,
            help="Port (0 picks a free one).",
        )(command)
        return click.option(
            "--host", default="127.0.0.1", show_default=True, help="Address to listen on."
        )(command)

    return apply


MOCK_POLICY_HELP = (
    "Policy of the embedded mock model (what '@mock' arguments point to): echo, "
    "tool_exerciser, module:function or file.py:function."
)
MODEL_HELP = "Model name sent to the endpoint (required with --base-url)."
BASE_URL_HELP = (
    "OpenAI-compatible endpoint root, e.g. http://localhost:8000/v1; without it the "
    "embedded mock model answers."
)
JSON_HELP = "Print the result as one JSON object on stdout instead of tables (docs/cli.md)."
CONCURRENCY_HELP = "Groups in flight at once (generate-qa: model requests in flight at once)."


def mock_policy_option(default: str | None = None) -> _Decorator:
    """``--mock-policy POLICY``, the embedded mock model's policy (``default`` shown)."""
    return click.option(
        "--mock-policy",
        metavar="POLICY",
        default=default,
        show_default=default is not None,
        help=MOCK_POLICY_HELP,
    )


def model_option() -> _Decorator:
    """``--model NAME``: the model name requests carry."""
    return click.option("--model", metavar="NAME", help=MODEL_HELP)


def base_url_option() -> _Decorator:
    """``--base-url URL``: the model endpoint (the embedded mock when not given)."""
    return click.option("--base-url", metavar="URL", help=BASE_URL_HELP)


def json_option() -> _Decorator:
    """``--json``, passed as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=JSON_HELP)


def concurrency_option(default: int) -> _Decorator:
    """``--concurrency N`` (at least 1)."""
    return click.option(
        "--concurrency",
        metavar="N",
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help=CONCURRENCY_HELP,
    )


def output_option(
    what: str, *, directory: bool = False, required: bool = False, name: str = "output"
) -> _Decorator:
    """``-o/--output PATH``: where the command writes ``what`` (a file, or a directory),
    passed as ``name``."""
    return click.option(
        "-o",
        "--output",
        name,
        metavar="DIR" if directory else "FILE",
        required=required,
        type=click.Path(path_type=Path, file_okay=not directory, dir_okay=directory),
        help=f"Write {what}.",
    )


def renamed_option(old: str, new: str) -> _Decorator:
    """A hidden ``old`` option that stops with a usage error pointing at ``new``."""

    def refuse(context: click.Context, parameter: click.Parameter, value: Any) -> None:
        if value is not None:
            raise click.UsageError(f"{old} is now {new}", context)

    return click.option(
        old, hidden=True, expose_value=False, callback=refuse, is_eager=True, default=None
    )


def max_examples_option(default: int | None = None, *, maximum: int = sys.maxsize) -> _Decorator:
    """``-n/--max-examples N``: only the first N examples, passed as ``max_examples``."""
    return click.option(
        "-n",
        "--max-examples",
        "max_examples",
        type=click.IntRange(min=1, max=maximum),
        metavar="N",
        default=default,
        show_default=default is not None,
        help="Run only the first N examples.",
    )


def group_size_option(default: int = 4, *, maximum: int | None = None) -> _Decorator:
    """``-k/--group-size K``: rollouts per example, passed as ``group_size``."""
    return click.option(
        "-k",
        "--group-size",
        metavar="K",
        type=click.IntRange(min=1, max=maximum),
        default=default,
        show_default=True,
        help="Rollouts per example (the group).",
    )


def eval_fraction_option(text: str) -> _Decorator:
    """``--eval-fraction``: the share of a data command's rows for eval.jsonl (``text``
    says what a split keeps whole)."""
    return click.option(
        "--eval-fraction",
        type=FiniteRange(0, 1, max_open=True),
        default=0.2,
        show_default=True,
        help=text,
    )


def seed_option() -> _Decorator:
    """``--seed``: the seed of a data command's train/eval split."""
    return click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split.")
