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
variable its program was started with (``MARKER_VARIABLE``, in ``/proc/*/environ``).
``end_processes`` is the sweep both run when a program is done with: SIGTERM, SIGKILL,
then marked processes killed until none is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Final

__all__ = [
    "KILL",
    "MARKER_VARIABLE",
    "Sweep",
    "end_processes",
    "kill_now",
    "marked_processes",
    "new_marker",
    "pipe_holders",
    "running",
    "session_members",
    "signal_session",
    "wait_until",
]

KILL: Final = getattr(signal, "SIGKILL", signal.SIGTERM)
"""SIGKILL (Windows has none: ``os.kill`` with SIGTERM is TerminateProcess there)."""
MARKER_VARIABLE: Final = "BENCHMAX_ROLLOUT_PROCESS"
"""The environment variable a started program (an ``AgentEnv`` program, an MCP stdio
server) gets a random, non-secret value in (its own per start): what its processes are
found by once they left its session and pipes."""
_POLL: Final = 0.01
_POLL_MAX: Final = 0.2
_PASSES: Final = 64
_PF_EXITING: Final = 0x4


async def wait_until(condition: Callable[[], bool], seconds: float) -> None:
    """Wait until ``condition`` holds or ``seconds`` pass (polling ever less often)."""
    deadline = time.monotonic() + seconds
    pause = _POLL
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)


def new_marker() -> str:
    """A fresh value for ``MARKER_VARIABLE`` (32 hex digits)."""
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class Sweep:
    """What ``end_processes`` did: whether anything was left to signal (``signalled``),
    whether something still ran after SIGTERM's grace (``killed``: SIGKILL was sent), and
    the marked processes still being started when it gave up (``escaping``, at most 10
    pids; empty when none is left)."""

    signalled: bool
    killed: bool
    escaping: tuple[int, ...]


async def end_processes(
    leader: int,
    exited: Callable[[], bool],
    marker: str,
    *,
    pipes: Collection[int] = (),
    grace: float,
) -> Sweep:
    """End what is left of a program started in a session of its own (``leader``, its
    pid; ``exited()``: whether it has exited) with ``MARKER_VARIABLE=marker``: its session,
    the processes holding its ``pipes`` (inodes; a daemon that left the session) and those
    carrying its marker get SIGTERM, and SIGKILL ``grace`` seconds later; marked processes
    are then killed until a scan finds none, and those killed outside the session are
    waited for until gone (together at most ``grace`` more seconds). In the usual case
    (nothing left) one scan of each kind. The caller reaps the program."""
    outside: set[int] = set()  # signalled outside the session: waited for until gone

    def holders() -> list[int]:
        held = (pipe_holders(pipes) or []) if pipes else []
        return held + (marked_processes(MARKER_VARIABLE, marker) or [])

    def signal_all(signum: int) -> bool:
        sent = signal_session(leader, signum)
        held = (pipe_holders(pipes) or []) if pipes else []
        for pid in held:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        marked = marked_processes(MARKER_VARIABLE, marker, signum) or []
        outside.update(held, marked)
        return sent or bool(held) or bool(marked)

    if not signal_all(signal.SIGTERM):
        return Sweep(signalled=False, killed=False, escaping=())
    await wait_until(lambda: exited() and not session_members(leader) and not holders(), grace)
    killed = signal_all(KILL)
    deadline = time.monotonic() + grace
    pause = _POLL
    while marked := marked_processes(MARKER_VARIABLE, marker, KILL):
        outside.update(marked)  # one forking as it was killed leaves children behind
        if time.monotonic() > deadline:
            return Sweep(signalled=True, killed=True, escaping=tuple(marked[:10]))
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)
    # A killed process stops counting as marked once it let go of its memory, a moment
    # before it is gone: wait for that moment, so nothing of it runs after its owner.
    await wait_until(lambda: not running(outside), max(deadline - time.monotonic(), 0.0))
    return Sweep(signalled=True, killed=killed, escaping=())


def kill_now(leader: int, marker: str) -> None:
    """SIGKILL what is left of ``leader``'s session and the processes carrying ``marker``
    at once, without waiting (a close cut short)."""
    signal_session(leader, KILL)
    marked_processes(MARKER_VARIABLE, marker, KILL)


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


def marked_processes(name: str, value: str, signum: int | None = None) -> list[int] | None:
    """Live processes (other than this one) of this user whose environment, as they were
    started with it, holds ``name=value``; ``None`` where ``/proc`` cannot say (not
    Linux). One read of each ``/proc/<pid>/environ`` (another user's is unreadable, or,
    for root, read and then skipped for its owner): a few milliseconds for a few hundred
    processes, about what ``session_members`` takes.

    A process listed but gone (or exiting) before its environment was read may have
    forked a child the listing missed (a daemon that forks and exits in a loop changes
    pid faster than a scan takes): finding nothing then, ``/proc`` is listed and read
    again, newest processes first, until a pass finds a marked process or sees no process
    end that an earlier pass had not seen end (at most ``_PASSES`` passes).

    A process that cleared or replaced its environment when it started (``env -i``, an
    ``exec`` with another environment), overwrote it in memory (setproctitle-style
    renaming) or runs as another user is not found. With ``signum``, each marked process
    is sent it the moment it is found (a daemon that changes pid every millisecond is gone
    by the end of a pass)."""
    pids = _other_pids()
    if pids is None:
        return None
    entry = f"{name}={value}\0".encode()
    seen_ending: set[str] = set()
    marked: list[int] = []
    for _ in range(_PASSES):
        marked, ending = _marked_among(pids, entry, signum)
        if marked or ending <= seen_ending:
            break
        seen_ending |= ending
        pids = _other_pids() or []
    return marked


def _marked_among(pids: list[str], entry: bytes, signum: int | None) -> tuple[list[int], set[str]]:
    """Those of ``pids`` (read newest first) of this user whose environment holds
    ``entry`` (``name=value\\0``), each sent ``signum`` as found when given, and those
    seen gone or exiting before their environment was read."""
    inner = b"\0" + entry
    uid = os.getuid()
    marked: list[int] = []
    ending: set[str] = set()
    for pid in sorted(pids, key=int, reverse=True):
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                variables = environ.read()
            if not variables:  # a zombie's or an exiting process's memory is gone
                if _ending(pid):
                    ending.add(pid)
                continue
            if not (variables.startswith(entry) or inner in variables):
                continue
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except FileNotFoundError:  # gone since the listing
            ending.add(pid)
            continue
        except ProcessLookupError:  # no memory: exiting, or a kernel thread (never marked)
            if _ending(pid):
                ending.add(pid)
            continue
        except OSError:  # another user's
            continue
        fields = _stat_fields(pid)
        if fields is not None and fields[0] not in ("Z", "X"):
            marked.append(int(pid))
            if signum is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signum)
    return marked, ending


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


def _ending(pid: str) -> bool:
    """Whether process ``pid`` is gone, a zombie or exiting (``PF_EXITING``)."""
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X") or int(fields[6]) & _PF_EXITING != 0


def _stat_fields(pid: str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, pgrp, session, ..."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()
