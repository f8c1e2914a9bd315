"""Default deadlines for the hooks an environment leaves unbounded, so a hook that never
returns is found.

BaseEnv's limits default to none (the 0.2 contract), so a ``compute_reward``, a tool, a
judge call or a ``rollout_context`` that awaits forever would hang a run. The group
pipeline (``benchmax run``, ``validate``, ``collect_group``, ``rescore``) binds a
``HookDeadlines`` for the groups it runs; wherever the environment sets no limit of its
own, each hook then gets the deadline of its kind. When one expires, the rollout settles
with the reason of that kind and one ERROR record names the hook, the line it was waiting
at (``file:line``) and the rollout:

==========================  =====================================  =======================
kind (field)                bounds (when the env sets no limit)     reason when it expires
==========================  =====================================  =======================
``rollout_context``         entering and leaving ``rollout_context`` ``setup_error`` (entry;
                                                                    leaving is only logged)
``tools``                   ``list_tools``, each ``run_tool`` call   ``tool_timeout``
                            (``tool_timeout`` unset), opening the
                            declared tools
``user_turn``               one ``user_turn`` call                  ``simulated_user_error``
``compute_reward``          one ``compute_reward`` (``reward_timeout``  ``reward_timeout``
                            unset)
``compute_group_rewards``   one ``compute_group_rewards``           ``group_reward_error``
``judge``                   one judge attempt (``Judge.timeout``     ``judge_error``
                            ``None``)
==========================  =====================================  =======================

Each defaults to :data:`DEFAULT_HOOK_SECONDS`; a limit the environment sets always wins.
``HookDeadlines`` is public as ``benchmax.runner.HookDeadlines`` (``RunConfig``,
``ValidationConfig`` and ``collect_group`` take one).
With no ``HookDeadlines`` bound (an environment's ``run_group`` called directly, as a
platform does) nothing changes: the 0.2 behavior.

**Other threads.** The binding lives in a context variable, which work a hook moves to a
thread pool or a new thread (``run_in_executor``, ``asyncio.run`` in a thread) does not
take along; a judge asked there would wait without a deadline. So code that runs outside
any binding, while bindings are in force elsewhere in the process, gets the loosest of
them per kind (``None`` when one of them sets none): a judge that a hook asks on another
thread's event loop stays bounded, and no pipeline's hooks are cut shorter than its own
deadlines. A binding in the running context (``None`` included) always wins.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Final, Literal

from benchmax._user_code import stuck_location
from benchmax._value_checks import is_finite_number

__all__ = [
    "DEFAULT_HOOK_SECONDS",
    "HookDeadline",
    "HookDeadlines",
    "HookKind",
    "bound_hook_deadlines",
    "deadline_for",
    "with_hook_deadlines",
]

DEFAULT_HOOK_SECONDS: Final = 900.0
"""Each hook kind's default deadline: 15 minutes, far above any hook that makes progress
(model calls have their own 600 s per attempt), short enough that a stuck run is noticed."""

HookKind = Literal[
    "rollout_context", "tools", "user_turn", "compute_reward", "compute_group_rewards", "judge"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookDeadlines:
    """Seconds each kind of hook may take where the environment sets no limit (``None``:
    no deadline for that kind); see the module docstring for what each bounds.

    Raises ``ValueError`` naming a value that is neither ``None`` nor a positive finite
    number.
    """

    rollout_context: float | None = DEFAULT_HOOK_SECONDS
    tools: float | None = DEFAULT_HOOK_SECONDS
    user_turn: float | None = DEFAULT_HOOK_SECONDS
    compute_reward: float | None = DEFAULT_HOOK_SECONDS
    compute_group_rewards: float | None = DEFAULT_HOOK_SECONDS
    judge: float | None = DEFAULT_HOOK_SECONDS

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is not None and not (is_finite_number(value) and value > 0):
                raise ValueError(f"hook deadline {item.name} must be a positive number or None")

    @classmethod
    def uniform(cls, seconds: float | None) -> HookDeadlines:
        """The same deadline for every kind."""
        return cls(**{item.name: seconds for item in fields(cls)})

    @classmethod
    def none(cls) -> HookDeadlines:
        """No default deadline at all (hooks are bounded by the environment's limits only)."""
        return cls.uniform(None)


@dataclass(frozen=True, slots=True)
class HookDeadline:
    """The deadline one hook call runs under: ``seconds`` (``None``: none), and whether it
    is the runner's default (``default``) rather than the environment's own limit."""

    seconds: float | None
    default: bool

    def expired_message(
        self, hook: str, timeout: BaseException, defined: object, limit: str | None = None
    ) -> str:
        """What to log when the runner's default deadline of ``hook`` expired: the hook,
        the line it was waiting at (else where ``defined`` is defined) and the limit that
        would choose another deadline."""
        where = stuck_location(timeout) or _definition(defined)
        setting = f"set {limit} on the environment" if limit else "make it return"
        return (
            f"{hook} did not return within the runner's default deadline of "
            f"{self.seconds:g}s; it was waiting at {where} ({setting}, or change the "
            "run's hook deadlines)"
        )


class _Unbound:
    """The context variable's value where no ``with_hook_deadlines`` block is running."""


_UNBOUND: Final = _Unbound()

_HOOK_DEADLINES: ContextVar[HookDeadlines | _Unbound | None] = ContextVar(
    "benchmax_hook_deadlines", default=_UNBOUND
)
"""The default deadlines bound for the running code (``with_hook_deadlines``)."""

_IN_FORCE: Counter[HookDeadlines] = Counter()
"""Every binding in force in the process, by value (``None`` counted as ``none()``)."""
_IN_FORCE_LOCK = threading.Lock()


def _forget_bindings_in_forked_child() -> None:
    """A forked child runs only the forking thread: the other threads' bindings are gone
    (its own stays in its context), and the lock may have been held by one of them."""
    global _IN_FORCE_LOCK
    _IN_FORCE_LOCK = threading.Lock()
    _IN_FORCE.clear()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_bindings_in_forked_child)


def deadline_for(kind: HookKind, own: float | None = None) -> HookDeadline:
    """The deadline of one ``kind`` hook call: the environment's ``own`` limit when set,
    else the bound default (none when no ``HookDeadlines`` is bound)."""
    if own is not None:
        return HookDeadline(own, default=False)
    bound = bound_hook_deadlines()
    return HookDeadline(None if bound is None else getattr(bound, kind), default=True)


def bound_hook_deadlines() -> HookDeadlines | None:
    """The ``HookDeadlines`` bound for the running code, if any; outside every binding,
    the loosest of those in force in the process (see "Other threads" above)."""
    bound = _HOOK_DEADLINES.get()
    if not isinstance(bound, _Unbound):
        return bound
    with _IN_FORCE_LOCK:
        in_force = list(_IN_FORCE)
    return _loosest(in_force) if in_force else None


@contextlib.contextmanager
def with_hook_deadlines(deadlines: HookDeadlines | None) -> Iterator[None]:
    """Bind ``deadlines`` for the block (and the tasks it starts); ``None`` binds none."""
    counted = HookDeadlines.none() if deadlines is None else deadlines
    token = _HOOK_DEADLINES.set(deadlines)
    with _IN_FORCE_LOCK:
        _IN_FORCE[counted] += 1
    try:
        yield
    finally:
        with _IN_FORCE_LOCK:
            left = _IN_FORCE[counted] - 1
            if left > 0:
                _IN_FORCE[counted] = left
            else:  # gone (or forgotten in a forked child)
                _IN_FORCE.pop(counted, None)
        _HOOK_DEADLINES.reset(token)


def _loosest(bindings: list[HookDeadlines]) -> HookDeadlines:
    """Per kind, the longest deadline of ``bindings`` (``None``, no deadline, when one
    of them sets none)."""
    loosest: dict[str, float | None] = {}
    for item in fields(HookDeadlines):
        values = [getattr(binding, item.name) for binding in bindings]
        loosest[item.name] = None if None in values else max(values)
    return HookDeadlines(**loosest)


def _definition(function: object) -> str:
    """``qualname (file:line)`` of where ``function`` is defined, or its repr."""
    target = inspect.unwrap(getattr(function, "__func__", function))  # type: ignore[arg-type]
    try:
        filename = inspect.getsourcefile(target)
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        return repr(function)
    return f"{getattr(target, '__qualname__', target)} ({filename}:{line})"
