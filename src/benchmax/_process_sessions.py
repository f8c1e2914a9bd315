"""Processes that never outlive their owner: finding and signalling a started session.

A program started with ``start_new_session=True`` leads a session (and a process group) of
its own, so everything it starts belongs to it: children it spawns, and a server a
launcher forks before exiting. ``session_members`` finds them by their session id or
process group in ``/proc`` (Linux); ``signal_session`` signals the group and each member;
``wait_until`` polls a condition ever less often (a scan of ``/proc`` is not free). MCP's
stdio transport (``benchmax.tools``) and ``AgentEnv``'s programs share them. A process that
starts a session of its own (a daemon) leaves the session; while it still holds a pipe the
program was given, ``pipe_holders`` finds it (by the pipe's inode in ``/proc/*/fd``); one
that also closed them is still found by ``marked_processes`` while it keeps the environment
variable its program was started with (``/proc/*/environ``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Collection
from typing import Final

__all__ = [
    "KILL",
    "marked_processes",
    "pipe_holders",
    "running",
    "session_members",
    "signal_session",
    "wait_until",
]

KILL: Final = getattr(signal, "SIGKILL", signal.SIGTERM)
"""SIGKILL (Windows has none: ``os.kill`` with SIGTERM is TerminateProcess there)."""
_POLL: Final = 0.01
_POLL_MAX: Final = 0.2


async def wait_until(condition: Callable[[], bool], seconds: float) -> None:
    """Wait until ``condition`` holds or ``seconds`` pass (polling ever less often)."""
    deadline = time.monotonic() + seconds
    pause = _POLL
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)


def signal_session(leader: int, signum: int) -> bool:
    """Send ``signum`` to every live process of the session ``leader`` started and to
    its process group; whether any was alive (zombies do not count)."""
    members = session_members(leader)
    sent = False
    killpg = getattr(os, "killpg", None)  # POSIX; elsewhere the leader alone is signalled
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if killpg is not None:
            killpg(leader, signum)
        else:
            os.kill(leader, signum)
        sent = True
    for pid in members or ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
    return sent if members is None else bool(members)


def session_members(leader: int) -> list[int] | None:
    """Live (non-zombie) processes whose session or process group is ``leader``'s;
    ``None`` where ``/proc`` cannot say (not Linux)."""
    pids = _other_pids()
    if pids is None:
        return None
    members: list[int] = []
    for name in pids:
        fields = _stat_fields(name)
        if fields is None or fields[0] in ("Z", "X"):
            continue
        if fields[2] == str(leader) or fields[3] == str(leader):
            members.append(int(name))
    return members


def pipe_holders(inodes: Collection[int]) -> list[int] | None:
    """Live processes (other than this one) with an open descriptor on one of the pipes
    whose inodes are ``inodes`` (``os.fstat(fd).st_ino`` of either end); ``None`` where
    ``/proc`` cannot say (not Linux). Scans every readable ``/proc/<pid>/fd``: not free."""
    pids = _other_pids()
    if pids is None:
        return None
    links = {f"pipe:[{inode}]" for inode in inodes}
    holders: list[int] = []
    for name in pids:
        try:
            descriptors = os.listdir(f"/proc/{name}/fd")
        except OSError:  # gone, or another user's
            continue
        for descriptor in descriptors:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{name}/fd/{descriptor}") in links:
                    fields = _stat_fields(name)
                    if fields is not None and fields[0] not in ("Z", "X"):
                        holders.append(int(name))
                    break
    return holders


def marked_processes(name: str, value: str) -> list[int] | None:
    """Live processes (other than this one) of this user whose environment, as they were
    started with it, holds ``name=value``; ``None`` where ``/proc`` cannot say (not
    Linux). One read of each ``/proc/<pid>/environ`` (another user's is unreadable, or,
    for root, read and then skipped for its owner): a few milliseconds for a few hundred
    processes, about what ``session_members`` takes.

    A process that cleared or replaced its environment when it started (``env -i``, an
    ``exec`` with another environment) or runs as another user is not found."""
    pids = _other_pids()
    if pids is None:
        return None
    entry = f"{name}={value}\0".encode()
    inner = b"\0" + entry
    uid = os.getuid()
    marked: list[int] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                variables = environ.read()
            if not (variables.startswith(entry) or inner in variables):
                continue
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:  # gone, or another user's
            continue
        fields = _stat_fields(pid)
        if fields is not None and fields[0] not in ("Z", "X"):
            marked.append(int(pid))
    return marked


def running(pids: Collection[int]) -> list[int]:
    """Those of ``pids`` that still run: not gone, not a zombie (a process killed a moment
    ago may still be exiting)."""
    alive: list[int] = []
    for pid in pids:
        fields = _stat_fields(str(pid))
        if fields is not None and fields[0] not in ("Z", "X"):
            alive.append(pid)
    return alive


def _other_pids() -> list[str] | None:
    """The ids (as ``/proc`` names them) of every process but this one; ``None`` where
    ``/proc`` cannot say (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    own = str(os.getpid())
    return [name for name in entries if name.isdigit() and name != own]


def _stat_fields(pid: str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, pgrp, session, ..."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()
