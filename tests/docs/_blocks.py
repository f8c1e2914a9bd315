"""The fenced code blocks of the documentation, with the directives written before them.

A block is run as written. The line right before its opening fence may say how:
``<!-- docs: skip (reason) -->`` (not run, the reason shown as the skip reason),
``<!-- docs: continue -->`` (a python block run after the page's previous python blocks, in
their namespace, as a notebook cell is) or ``<!-- docs: continue (page.md) -->`` (run after
the first python block of another page, named relative to this one: the example that page
opens with, which this block builds on). ``<!-- docs: env (NAME=value) -->`` runs the block
with that environment variable set: a setting the block's command honors that makes a long
command short without retyping it (``PYTEST_ADDOPTS=FILE -k NAME`` runs one test of a block's
``uv run pytest``).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^[ \t]*```(?P<language>[\w+-]*)[^\n]*$")
DIRECTIVE = re.compile(
    r"^\s*<!--\s*docs:\s*(?P<word>skip|continue|env)\s*(?:\((?P<reason>.*)\))?\s*-->\s*$"
)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its directive."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None  # the reason, when the block is not run
    continues: bool
    after_page: Path | None = None  # continue (page.md): after that page's first python block
    environment: tuple[tuple[str, str], ...] = ()  # env (NAME=value): set while it runs

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def documentation_files() -> list[Path]:
    """README.md and every page of the site."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            body.append(lines[end])
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}:{index + 1}: the code block is never closed")
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        directive = DIRECTIVE.match(previous)
        skip = None
        after_page = None
        environment: tuple[tuple[str, str], ...] = ()
        if directive and directive["word"] == "skip":
            skip = directive["reason"] or "marked skip"
        elif directive and directive["word"] == "env":
            name, equals, value = (directive["reason"] or "").partition("=")
            if not equals or not name.strip().isidentifier():
                raise ValueError(f"{path}:{index}: 'docs: env' needs (NAME=value)")
            environment = ((name.strip(), value.strip()),)
        elif directive and directive["reason"]:
            after_page = (path.parent / directive["reason"].strip()).resolve()
        blocks.append(
            Block(
                path=path,
                line=index + 1,
                language=opening["language"].lower(),
                code=textwrap.dedent("\n".join(body)) + "\n" if body else "",
                skip=skip,
                continues=bool(directive and directive["word"] == "continue"),
                after_page=after_page,
                environment=environment,
            )
        )
        index = end + 1
    return blocks


def every_block() -> list[Block]:
    return [block for path in documentation_files() for block in read_blocks(path)]


def python_chain(block: Block) -> list[Block]:
    """The python blocks that run before ``block`` in its namespace, then ``block``."""
    if not block.continues:
        return [block]
    if block.after_page is not None:
        opening = next(
            (other for other in read_blocks(block.after_page) if other.language == "python"),
            None,
        )
        if opening is None:
            raise ValueError(f"{block.where}: no python block in {block.after_page}")
        return [*python_chain(opening), block]
    earlier = [
        other
        for other in read_blocks(block.path)
        if other.language == "python" and other.line < block.line
    ]
    if not earlier:
        raise ValueError(f"{block.where}: 'docs: continue' but no python block before it")
    return [*python_chain(earlier[-1]), block]
