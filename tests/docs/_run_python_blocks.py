"""Runs python blocks (paths of JSON files naming them) in one namespace, as scripts run.

Used by tests/docs/test_code_blocks.py in a subprocess: ``python _run_python_blocks.py
BLOCKS.json``, where the file holds ``[[where, code], ...]``. A block with a top-level
``await`` runs in its own event loop.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import sys


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        blocks = json.load(file)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for where, code in blocks:
        compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if compiled.co_flags & inspect.CO_COROUTINE:
            asyncio.run(eval(compiled, namespace))  # a block with top-level await
        else:
            exec(compiled, namespace)


if __name__ == "__main__":
    main()
