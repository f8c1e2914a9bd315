"""Program files that travel with an ``AgentEnv`` class pickled by value (a bundle).

A bundle carries an environment's project-local Python source, not the other files of its
project, so ``command = ("sh", str(HERE / "agent.sh"))`` would name a file the loading
machine lacks. When an ``AgentEnv`` subclass is defined, each ``command`` argument that
names an existing file in the class's own project (the directory of the nearest
``pyproject.toml`` above the class's module, else the module's directory) becomes a
:class:`ProgramFile`: a ``str`` (its absolute path, so nothing else changes) that pickles
as the file's bytes and mode. Unpickling writes them once to
``<temp dir>/benchmax-programs/<sha256>/<file name>`` and gives that path instead, so the
program runs wherever the bundle is loaded. Classes pickled by reference (the usual case
between processes of one machine) carry nothing extra.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmax._file_replace import replace_file

__all__ = ["ProgramFile", "program_command"]

_MAX_PROGRAM_BYTES = 64 * 1024 * 1024


class ProgramFile(str):
    """A project file named in ``command``: its absolute path, carried by value when
    pickled (file bytes and permission bits)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[object, tuple[str, bytes, int]]:
        path = Path(self)
        try:
            size = path.stat().st_size
            if size > _MAX_PROGRAM_BYTES:
                raise ValueError(
                    f"program file {path} is {size} bytes, over the"
                    f" {_MAX_PROGRAM_BYTES // 2**20} MiB a pickled environment carries"
                )
            data = path.read_bytes()
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError as error:
            raise ValueError(
                f"program file {path} named in command cannot be read: {error}"
            ) from error
        return (_materialized, (path.name, data, mode))


def _materialized(name: str, data: bytes, mode: int) -> ProgramFile:
    """Write a carried program file (once per content) and name it."""
    digest = hashlib.sha256(data + name.encode()).hexdigest()
    target = Path(tempfile.gettempdir(), "benchmax-programs", digest, name)
    if not (target.is_file() and target.read_bytes() == data):
        replace_file(target, data)
    os.chmod(target, mode | stat.S_IRUSR)
    return ProgramFile(target)


def program_command(command: Sequence[str], module_name: str) -> tuple[str, ...]:
    """``command`` with each argument naming an existing file in the project of
    ``module_name`` as a :class:`ProgramFile`."""
    root = _project_dir(module_name)
    if root is None:
        return tuple(command)
    return tuple(_program_part(part, root) for part in command)


def _program_part(part: str, root: Path) -> str:
    if isinstance(part, ProgramFile) or not os.path.isabs(part):
        return part
    try:
        given, path = Path(part), Path(part).resolve()
        installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        if (
            path.is_file()
            and path.is_relative_to(root)
            and "site-packages" not in path.parts
            and not any(given.is_relative_to(p) or path.is_relative_to(p) for p in installed)
        ):
            return ProgramFile(part)
    except (OSError, ValueError):
        pass
    return part


def _project_dir(module_name: str) -> Path | None:
    """The directory of the nearest ``pyproject.toml`` above the module's file, else the
    module's directory; ``None`` for a module without a file."""
    module = sys.modules.get(module_name)
    source = getattr(module, "__file__", None)
    if not isinstance(source, str):
        return None
    start = Path(source).resolve().parent
    for directory in (start, *start.parents):
        if (directory / "pyproject.toml").is_file():
            return directory
    return start
