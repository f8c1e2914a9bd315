"""RewardKit partial credit: the weighted mean of a reward-details document's criteria."""

from __future__ import annotations

from benchmax._value_checks import is_finite_number

__all__ = ["criteria_credit"]


def _finite_number(value: object) -> float | None:
    """``value`` as a finite float; ``None`` for booleans, non-numbers and non-finite values."""
    # A JSON integer too large for a float is not finite here, so it is not a usable number.
    return float(value) if is_finite_number(value) else None


def criteria_credit(document: object) -> float | None:
    """Return ``sum(weight * value) / sum(weight)`` over the criteria, or ``None``.

    ``document`` is the parsed ``verifier/reward-details.json``: an object whose
    ``"reward"`` member (or the object itself) holds a non-empty ``"criteria"``
    array. Weights default to 1.0 and must be finite and non-negative; values
    default to 0.0 and must be finite. Anything malformed yields ``None``.
    """
    if not isinstance(document, dict):
        return None
    details = document.get("reward", document)
    if not isinstance(details, dict):
        return None
    criteria = details.get("criteria")
    if not isinstance(criteria, list) or not criteria:
        return None
    total = 0.0
    earned = 0.0
    for criterion in criteria:
        if not isinstance(criterion, dict):
            return None
        weight = _finite_number(criterion.get("weight", 1.0))
        value = _finite_number(criterion.get("value", 0.0))
        if weight is None or weight < 0 or value is None:
            return None
        total += weight
        earned += weight * value
    if total <= 0:
        return None
    return earned / total
