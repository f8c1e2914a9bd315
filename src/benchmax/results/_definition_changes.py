"""What changed between a results header's run definition and the current one: what a
resume compares (``definition_differences``) and the one change it accepts without
``force`` (running more examples)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["definition_differences", "normalized", "only_extends"]


def normalized(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


_ADDED_LATER = frozenset({"env_source", "limits"})
"""Definition keys that headers written before they existed lack: not compared then."""


def definition_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two run definitions (``[]`` when equal).

    A change of the environment's source names the modules that changed. Keys that older
    headers lack (``env_source``, ``limits``) are compared only when recorded, an
    empty ``constructor_args`` equals none, and ``limits.model_retries`` is not compared.
    """
    recorded, current = _comparable(recorded), _comparable(current)
    differences = []
    for key in dict.fromkeys([*current, *recorded]):
        if key in _ADDED_LATER and key not in recorded:
            continue
        old, new = normalized(recorded.get(key)), normalized(current.get(key))
        if old == new:
            continue
        if key == "env_source" and isinstance(old, dict) and isinstance(new, dict):
            differences.append(_source_difference(old, new))
        else:
            differences.append(f"{key} was {_short(old)}, now {_short(new)}")
    return differences


def only_extends(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``current`` differs from ``recorded`` only by running more examples: a
    larger ``max_examples``, or none (all). The first groups stay the same examples (the
    split's first ``max_examples``; a group whose example id at its index changed is run
    again all the same), so such a run is resumed without ``force``."""
    old, new = recorded.get("max_examples"), current.get("max_examples")
    if not isinstance(old, int) or isinstance(old, bool):
        return False
    if new is not None and (not isinstance(new, int) or isinstance(new, bool) or new <= old):
        return False
    unbounded = {"max_examples": None}
    return not definition_differences({**recorded, **unbounded}, {**current, **unbounded})


_NOT_COMPARED_LIMITS = frozenset({"model_retries"})
"""Limits a resume does not compare: retrying a transient failure changes how hard a model
call is tried, not what the run measures (so ``run --retry-failed`` may raise it)."""


def _comparable(definition: Mapping[str, Any]) -> dict[str, Any]:
    comparable = dict(definition)
    limits = comparable.get("limits")
    if isinstance(limits, Mapping):
        comparable["limits"] = {k: v for k, v in limits.items() if k not in _NOT_COMPARED_LIMITS}
    env = comparable.get("env")
    if isinstance(env, Mapping) and env.get("constructor_args") == {}:
        comparable["env"] = {k: v for k, v in env.items() if k != "constructor_args"}
    return comparable


def _source_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    changes = [
        f"{name} ({'new' if name not in old else 'gone' if name not in new else 'edited'})"
        for name in sorted({*old, *new})
        if old.get(name) != new.get(name)
    ]
    return f"the environment's source changed: {', '.join(changes)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."
