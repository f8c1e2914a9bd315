"""Contract errors of a run: which hook broke the contract, and the full traceback on disk.

The terminal gets one line (``GroupContractError``); the traceback, with its chained causes
and notes, is appended to ``<results stem>.error.log`` beside the results file.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import CodeType
from typing import Any

from benchmax.runner._config import mask_secrets
from benchmax.runner._errors import GroupContractError
from benchmax.trajectory import LogEntry

__all__ = ["error_log_path", "group_contract_error", "hook_that_raised"]

_RAISED_BY = re.compile(r"^benchmax: raised by (\S+)$")


def error_log_path(results_path: Path) -> Path:
    """``runs/x.jsonl`` -> ``runs/x.error.log``."""
    return results_path.with_name(results_path.stem + ".error.log")


def hook_that_raised(error: BaseException, env_class: type) -> str | None:
    """``Class.hook`` of the environment method that raised ``error``, when known.

    The library marks exceptions escaping a user hook with the note
    ``benchmax: raised by <Class>.<hook>``. Without one, the traceback is read: the hook is
    the innermost method of the environment class (defined outside benchmax) that
    benchmax code called, e.g. ``list_tools`` even when a helper it calls raised.
    """
    for note in getattr(error, "__notes__", ()):
        match = _RAISED_BY.match(str(note))
        if match is not None:
            return match.group(1)
    methods = _user_methods(env_class)
    found = None
    called_by_library = False
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        hook = methods.get(frame.f_code)
        if hook is not None and called_by_library:
            found = hook
        called_by_library = _in_benchmax(frame.f_globals.get("__name__"))
        tb = tb.tb_next
    return found


def _in_benchmax(module: object) -> bool:
    return isinstance(module, str) and module.partition(".")[0] == "benchmax"


def _user_methods(env_class: type) -> dict[CodeType, str]:
    methods: dict[CodeType, str] = {}
    for cls in reversed(env_class.__mro__):
        if _in_benchmax(cls.__module__) or cls.__module__ == "builtins":
            continue
        for name, attribute in vars(cls).items():
            function = getattr(attribute, "__func__", getattr(attribute, "fget", attribute))
            code = getattr(function, "__code__", None)
            if isinstance(code, CodeType) and not _in_benchmax(
                getattr(function, "__module__", None)
            ):
                methods[code] = f"{env_class.__name__}.{name}"
    return methods


def group_contract_error(
    env: Any,
    example_index: int,
    example_id: str,
    error: BaseException,
    results_path: Path | None,
    secrets: Sequence[str] = (),
    *,
    logs: Sequence[LogEntry] = (),
) -> GroupContractError:
    """The one-line error for ``error`` out of ``run_group``; its traceback, and the records
    the group logged (``logs``, secrets already masked), are appended to the error log."""
    hook = hook_that_raised(error, type(env))
    log_path = None
    if results_path is not None:
        log_path = error_log_path(results_path)
        entry = _entry(example_index, example_id, hook, error, logs)
        if not _append(log_path, mask_secrets(entry, secrets)):
            log_path = None
    return GroupContractError(example_index, example_id, error, hook=hook, log_path=log_path)


def _entry(
    example_index: int,
    example_id: str,
    hook: str | None,
    error: BaseException,
    logs: Sequence[LogEntry],
) -> str:
    when = datetime.now(UTC).isoformat(timespec="seconds")
    where = f" in {hook}" if hook else ""
    parts = [
        f"=== {when} example {example_index} ({example_id}) broke the environment "
        f"contract{where}\n",
        "".join(traceback.format_exception(error)),
    ]
    if logs:
        parts.append(f"--- {len(logs)} record(s) the group logged before it stopped:\n")
        for log in logs:
            parts.append(f"{log['time']} {log['level']} {log['logger']}: {log['message']}\n")
            if "exception" in log:
                parts.append(log["exception"].rstrip("\n") + "\n")
    return "".join(parts) + "\n"


def _append(path: Path, text: str) -> bool:
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as log:
            log.write(text)
    except OSError:
        return False
    return True
