"""What to ask: question-type targets and styles, spread over the chunks' question slots."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Final, Literal

from benchmax._value_checks import is_finite_number

__all__ = [
    "QUESTION_TYPES",
    "STYLES",
    "QuestionType",
    "Style",
    "interleave",
    "normalize_weights",
    "parse_weights",
    "spread_styles",
]

QuestionType = Literal["lookup", "multi_hop", "reasoning"]
Style = Literal["natural", "keyword", "expert"]

QUESTION_TYPES: Final[tuple[QuestionType, ...]] = ("lookup", "multi_hop", "reasoning")
"""``lookup``: one fact of one chunk; ``multi_hop``: facts of a chunk and a related chunk;
``reasoning``: a short chain of inference (comparison, count, difference) over a chunk."""

STYLES: Final[tuple[Style, ...]] = ("natural", "keyword", "expert")
"""``natural``: the question as written; ``keyword``: a terse search query;
``expert``: phrased in the field's own vocabulary."""


def normalize_weights(
    weights: Mapping[str, float], known: Sequence[str], what: str
) -> dict[str, float]:
    """``weights`` scaled to sum to 1, in ``known`` order; zero weights left out.

    Raises ``ValueError`` for an unknown name, a negative or non-finite weight, or no
    positive weight.
    """
    if not isinstance(weights, Mapping):
        raise TypeError(f"{what} must be a mapping of name to weight")
    for name, weight in weights.items():
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} (known: {', '.join(known)})")
        if not is_finite_number(weight) or weight < 0:
            raise ValueError(f"{what} weight of {name!r} must be a non-negative number")
    total = float(sum(weights.values()))
    if total <= 0:
        raise ValueError(f"{what} need at least one positive weight")
    return {name: weights[name] / total for name in known if weights.get(name, 0) > 0}


def parse_weights(text: str, known: Sequence[str], what: str) -> dict[str, float]:
    """``"lookup=0.5,multi_hop=0.3"`` (a bare name weighs 1) as normalized weights.

    Raises ``ValueError`` naming the bad part.
    """
    weights: dict[str, float] = {}
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        name, _, value = part.partition("=")
        name = name.strip()
        try:
            weight = float(value) if value.strip() else 1.0
        except ValueError:
            raise ValueError(f"{what}: {part!r} is not NAME=WEIGHT") from None
        if name in weights:
            raise ValueError(f"{what}: {name!r} is given twice")
        weights[name] = weight
    return normalize_weights(weights, known, what)


def interleave(weights: Mapping[str, float], slots: int) -> list[str]:
    """``slots`` names spread as evenly as the weights allow (smooth weighted round-robin):
    every prefix holds each name within one of its share, so the whole list matches the
    target to the nearest slot. ``weights`` sum to 1."""
    current = dict.fromkeys(weights, 0.0)
    order = list(weights)
    chosen: list[str] = []
    for _ in range(slots):
        for name, weight in weights.items():
            current[name] += weight
        best = max(order, key=lambda name: (current[name], -order.index(name)))
        current[best] -= 1.0
        chosen.append(best)
    return chosen


def spread_styles(styles: Sequence[str], slots: int, seed: int) -> list[str]:
    """``slots`` styles, each used equally often (to one slot), shuffled with ``seed``."""
    chosen = [styles[index % len(styles)] for index in range(slots)]
    random.Random(seed).shuffle(chosen)
    return chosen
