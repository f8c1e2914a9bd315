"""The CLI reference page says what ``benchmax COMMAND --help`` says, for every command.

docs/cli.md asks mkdocs-click to render the command tree. The test renders the page as
``mkdocs build`` does (Python-Markdown with the extensions and settings of mkdocs.yml, the
mkdocs-click extension among them) and compares each command's section with the command's
own ``--help``: its usage line and its options, every option with its help text. A command
missing from the page, a page edited by hand (or pasted once and left to drift) and a
rendering that loses the options fail here. The exit statuses are tested against the page
in tests/cli/test_exit_codes.py.
"""

from __future__ import annotations

import html
import re

import click
import pytest
from click.testing import CliRunner
from tests.docs._blocks import REPO

from benchmax.cli import cli

pytestmark = pytest.mark.docs

_SECTION = re.compile(r'<h[23] id="(?P<id>benchmax[\w-]*)">')
_CODE_AFTER = r'<p><strong>{label}:</strong></p>\s*<div class="highlight"><pre>(?P<code>.*?)</pre>'


@pytest.fixture(scope="module")
def page() -> dict[str, str]:
    """The rendered reference page, cut into one piece of HTML per command section."""
    # Imported here: the default suite collects this module without the docs group.
    import markdown
    from mkdocs.config import load_config

    config = load_config(str(REPO / "mkdocs.yml"))
    source = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    rendered = markdown.markdown(
        source,
        extensions=config["markdown_extensions"],
        extension_configs=config["mdx_configs"],
    )
    starts = list(_SECTION.finditer(rendered))
    ends = [match.start() for match in starts[1:]] + [len(rendered)]
    return {
        match["id"]: rendered[match.start() : end] for match, end in zip(starts, ends, strict=True)
    }


def _commands() -> list[str]:
    return sorted(name for name, command in cli.commands.items() if not command.hidden)


def _help(name: str) -> str:
    result = CliRunner().invoke(cli, [name, "--help"], prog_name="benchmax")
    assert result.exit_code == 0, result.output
    return result.output


def _words(text: str) -> str:
    """The text without its white space: the help and the page wrap at different widths
    (and click may break a line inside a hyphenated word)."""
    return "".join(text.split())


def _block(section: str, label: str) -> str:
    found = re.search(_CODE_AFTER.format(label=label), section, flags=re.DOTALL)
    assert found is not None, f"no {label} block"
    return html.unescape(re.sub(r"<[^>]+>", "", found["code"]))


def _help_part(text: str, label: str) -> str:
    """The lines of ``--help`` under ``Options:`` (to the end or the next heading)."""
    lines = text.splitlines()
    start = lines.index(f"{label}:") + 1
    end = next(
        (i for i in range(start, len(lines)) if lines[i] and not lines[i][0].isspace()),
        len(lines),
    )
    return "\n".join(lines[start:end])


def test_every_command_has_a_section_and_no_other_section_exists(page: dict[str, str]) -> None:
    assert sorted(page) == sorted(["benchmax", *(f"benchmax-{name}" for name in _commands())])


@pytest.mark.parametrize("name", _commands())
def test_the_section_is_the_commands_help(page: dict[str, str], name: str) -> None:
    section = page[f"benchmax-{name}"]
    text = _help(name)
    usage = text.splitlines()[0].removeprefix("Usage: ")
    assert _words(_block(section, "Usage")) == _words(usage)
    assert _words(_block(section, "Options")) == _words(_help_part(text, "Options"))
    command = cli.commands[name]
    assert isinstance(command, click.Command)
    first_line = (command.help or "").split("\n\n", 1)[0]
    assert _words(html.escape(first_line, quote=False)) in _words(section)


def test_every_option_of_every_command_is_on_the_page(page: dict[str, str]) -> None:
    """Each option name of each command appears in its section (a second view, by name)."""
    missing = {
        name: [
            opt
            for param in cli.commands[name].params
            if isinstance(param, click.Option) and not param.hidden
            for opt in (*param.opts, *param.secondary_opts)
            if opt not in html.unescape(page[f"benchmax-{name}"])
        ]
        for name in _commands()
    }
    assert {name: opts for name, opts in missing.items() if opts} == {}
