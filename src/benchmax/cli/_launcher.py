"""How this ``benchmax`` process was launched, so a command it prints runs as printed.

Under ``uv run`` (``uv run --group trl benchmax train ...``) a printed follow-up command
(the resume command of ``benchmax train``) must start the same way, or it runs outside
the project's environment. uv sets ``UV`` in the environment of what it runs; on Linux the
command lines of this process's ancestors (``/proc/PID/cmdline``) give the ``uv run``
options (``--group trl``, ``--with ...``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["launcher_prefix", "uv_run_prefix"]

_VALUE_OPTIONS = frozenset(
    {
        "--group", "--only-group", "--no-group", "--extra", "--no-extra", "--with",
        "-w", "--with-editable", "--with-requirements", "--python", "-p", "--project",
        "--directory", "--package", "--env-file", "--index", "--index-url",
        "--extra-index-url", "--find-links", "-f", "--config-file", "--cache-dir",
    }
)  # fmt: skip
_ANCESTORS = 6


def uv_run_prefix(argv: Sequence[str]) -> list[str] | None:
    """``["uv", "run", OPTIONS...]`` from a ``uv run OPTIONS... COMMAND ...`` command line
    (the options before the command, whatever it is), or ``None`` when ``argv`` is not
    one."""
    if len(argv) < 3 or Path(argv[0]).name != "uv" or argv[1] != "run":
        return None
    index = 2
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return ["uv", "run", *argv[2:index]]
        if not token.startswith("-"):
            return ["uv", "run", *argv[2:index]]
        index += 2 if token in _VALUE_OPTIONS else 1
    return None


def launcher_prefix(environ: Mapping[str, str] | None = None) -> list[str]:
    """The prefix a printed ``benchmax ...`` command needs to run as this one did: the
    nearest ancestor's ``uv run`` and its options under uv (``["uv", "run"]`` when they
    cannot be read), else ``[]``."""
    env = os.environ if environ is None else environ
    if not env.get("UV"):
        return []
    pid = os.getppid()
    for _ in range(_ANCESTORS):
        proc = Path(f"/proc/{pid}")
        try:
            raw = (proc / "cmdline").read_bytes()
            status = (proc / "status").read_text()
        except OSError:
            break
        argv = [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
        prefix = uv_run_prefix(argv)
        if prefix is not None:
            return prefix
        parents = [line.split()[1] for line in status.splitlines() if line.startswith("PPid:")]
        pid = int(parents[0]) if parents else 0
        if pid <= 1:
            break
    return ["uv", "run"]
