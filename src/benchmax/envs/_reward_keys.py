"""The one check of an environment's declared ``reward_keys``."""

from __future__ import annotations

from collections.abc import Sequence

from benchmax._value_checks import is_non_empty_str

__all__ = ["declared_reward_keys"]


def declared_reward_keys(reward_keys: object, *, kind: str = "reward") -> tuple[str, ...]:
    """``reward_keys`` as a validated tuple; ``kind`` names what at least one must be."""
    if isinstance(reward_keys, str | bytes) or not isinstance(reward_keys, Sequence):
        raise TypeError("reward_keys must be a sequence of strings")
    declared = tuple(reward_keys)
    if not declared:
        raise ValueError(f"reward_keys must declare at least one {kind}")
    if any(not is_non_empty_str(key) for key in declared):
        raise ValueError("reward_keys must contain non-empty strings")
    if len(set(declared)) != len(declared):
        raise ValueError("reward_keys must not contain duplicates")
    return declared
