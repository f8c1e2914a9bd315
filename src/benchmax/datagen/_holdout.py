"""Which groups of rows go to eval: whole groups (documents, conversations, users), never split."""

from __future__ import annotations

import random
from collections.abc import Mapping

__all__ = ["eval_groups"]


def eval_groups[K: (str, int)](sizes: Mapping[K, int], eval_fraction: float, seed: int) -> set[K]:
    """The groups held out for eval, chosen whole so no group crosses train and eval.

    ``sizes`` maps each group to its weight (rows, chunks). In an order shuffled with
    ``seed`` (from the sorted keys, so the same input always gives the same split), a group
    goes to eval when it brings eval's share of the total weight closer to
    ``eval_fraction``. Train always keeps at least one group; with a positive fraction and
    two or more groups, eval gets at least one (the smallest, in shuffled order).
    """
    groups = sorted(sizes)
    random.Random(seed).shuffle(groups)
    target = eval_fraction * sum(sizes.values())
    chosen: set[K] = set()
    held = 0
    for group in groups:
        if len(chosen) >= len(groups) - 1:
            break
        if abs(held + sizes[group] - target) < abs(held - target):
            chosen.add(group)
            held += sizes[group]
    if not chosen and eval_fraction > 0 and len(groups) > 1:
        chosen.add(min(groups, key=sizes.__getitem__))
    return chosen
