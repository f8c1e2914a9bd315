"""``benchmax init``: a new environment project that runs at once."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from benchmax.cli._safe_text import terminal_safe

__all__ = ["init_command", "shell_quoted"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shell_quoted(text: str) -> str:
    """``text`` as one shell word that prints safely: ``shlex.quote``, or, when it holds
    control characters (a newline, an escape), bash/zsh ANSI-C quoting ``$'a\\nb'`` with
    each of them as ``\\xNN``, so the line pasted back is the same name."""
    if not _CONTROL.search(text) and terminal_safe(text) == text:
        return shlex.quote(text)
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    escaped = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", escaped)
    return "$'" + terminal_safe(escaped) + "'"


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--template",
    type=click.Choice(["qa", "tools", "judge"]),
    default="qa",
    show_default=True,
    help="qa: short answers, exact match; tools: a lookup tool over several turns; "
    "judge: rubric grades by a judge model.",
)
def init_command(directory: Path, template: str) -> None:
    """Create a new environment project in DIRECTORY (new or empty).

    It holds env.py, data/train.jsonl and data/eval.jsonl, a mock policy, tests, a README
    and a pyproject.toml depending on this benchmax (a path dependency on its source
    checkout when it runs from one). Inside it, uv run pytest, benchmax validate and
    benchmax run work at once, offline.
    """
    from benchmax.scaffold import TEMPLATES, ScaffoldError, benchmax_requirement, create_project

    try:
        written = create_project(directory, template)
    except ScaffoldError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"cannot write to {directory}: {error}") from None
    chosen = TEMPLATES[template]
    requirement, source = benchmax_requirement()
    out = Console(highlight=False)
    shown = terminal_safe(str(directory), keep_newlines=False)  # never raw escapes or newlines
    out.print(
        f"created {escape(shown)} ({template} template, {len(written)} files)",
        soft_wrap=True,  # a long path stays on one line, as typed
    )
    depends = f"{requirement} from {source}" if source is not None else requirement
    out.print(f"depends on {escape(terminal_safe(depends, keep_newlines=False))}", soft_wrap=True)
    out.print("next:")
    for line in (
        f"cd {shell_quoted(str(directory))}",  # pasted into a shell as printed
        "uv run pytest",
        f"uv run benchmax validate {chosen.target} --data data --mock-policy {chosen.policy}"
        f"{chosen.env_args}",
        f"uv run benchmax run {chosen.target} --data data --mock-policy {chosen.policy}"
        f"{chosen.env_args} -o runs/mock.jsonl",
        "uv run benchmax view runs/mock.jsonl",
    ):
        out.print(f"  {escape(line)}", soft_wrap=True)
