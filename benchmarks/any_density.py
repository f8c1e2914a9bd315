"""How often ``Any`` stands in the source: issue 29's "Any per kloc" figure.

``uv run python benchmarks/any_density.py [PATH ...]`` (default ``src``) prints, for each
path given (a folder or a file) and for their union:

- ``code``: ``Any`` tokens in code (annotations, casts, generics, ``typing.Any``), found with
  :mod:`tokenize` so comments and strings do not count, leaving out the names on import lines
  (``from typing import Any`` says nothing about how often it is used);
- ``word``: every occurrence of the word ``Any`` in the text (imports, comments and docstrings
  included), the raw figure;
- ``lines``: the non-blank lines;
- ``code/kloc`` and ``word/kloc``: the two counts per 1,000 non-blank lines.

Reads files as text and writes nothing.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

_WORD = re.compile(r"\bAny\b")


def _python_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(path for path in root.rglob("*.py") if path.is_file())


def count_file(path: Path) -> tuple[int, int, int]:
    """``(code Any tokens outside import lines, every word Any, non-blank lines)`` of one file."""
    text = path.read_text(encoding="utf-8")
    lines = sum(1 for line in text.splitlines() if line.strip())
    words = len(_WORD.findall(text))
    code = 0
    on_import = False
    at_line_start = True
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            on_import = False
            at_line_start = True
            continue
        if token.type in (
            tokenize.NL,
            tokenize.COMMENT,
            tokenize.INDENT,
            tokenize.DEDENT,
        ):
            continue
        if at_line_start:
            on_import = token.type == tokenize.NAME and token.string in ("import", "from")
            at_line_start = False
        if token.type == tokenize.NAME and token.string == "Any" and not on_import:
            code += 1
    return code, words, lines


def _row(label: str, code: int, words: int, lines: int) -> str:
    per_kloc = 1000 / lines if lines else 0.0
    return (
        f"{label:<40} {code:>6} {words:>6} {lines:>7} "
        f"{code * per_kloc:>10.1f} {words * per_kloc:>10.1f}"
    )


def main(argv: list[str]) -> None:
    roots = [Path(arg) for arg in argv] or [Path("src")]
    print(f"{'path':<40} {'code':>6} {'word':>6} {'lines':>7} {'code/kloc':>10} {'word/kloc':>10}")
    seen: set[Path] = set()
    total = [0, 0, 0]
    for root in roots:
        figures = [0, 0, 0]
        for path in _python_files(root):
            counts = count_file(path)
            figures = [a + b for a, b in zip(figures, counts, strict=True)]
            if path.resolve() not in seen:
                seen.add(path.resolve())
                total = [a + b for a, b in zip(total, counts, strict=True)]
        print(_row(str(root), *figures))
    if len(roots) > 1:
        print(_row("(all of the above)", *total))


if __name__ == "__main__":
    main(sys.argv[1:])
