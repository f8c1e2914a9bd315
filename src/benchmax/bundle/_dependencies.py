"""PEP 508 dependency canonicalization: one declaration per distribution, sorted."""

from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from benchmax._value_checks import is_non_empty_str

__all__ = ["declared_distributions", "normalize_dependencies"]


def normalize_dependencies(value: object) -> tuple[str, ...]:
    """Validate PEP 508 strings and return their canonical forms, sorted.

    Raises ``TypeError`` for anything but a non-string sequence and ``ValueError`` for empty,
    unparsable or repeated targets; every message mentions dependencies.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError("pip dependencies must be a sequence of PEP 508 strings")
    first_index: dict[str, int] = {}
    rendered: list[str] = []
    for index, item in enumerate(value):
        if not is_non_empty_str(item):
            raise ValueError(f"dependency at index {index} must be a non-empty string")
        try:
            requirement = Requirement(item.strip())
        except InvalidRequirement as exc:
            raise ValueError(f"dependency at index {index} is not valid PEP 508: {item!r}") from exc
        target = canonicalize_name(requirement.name)
        if target in first_index:
            raise ValueError(
                f"dependency target {target!r} is declared more than once "
                f"(indexes {first_index[target]} and {index}); merge its version constraints, "
                "extras and markers into a single declaration"
            )
        first_index[target] = index
        canonical = _render(requirement, target)
        try:  # packaging accepts some names PEP 508 does not ("0_"), whose canonical form
            Requirement(canonical)  # ("0-") then no longer parses: refuse them up front
        except InvalidRequirement as exc:
            raise ValueError(f"dependency at index {index} is not valid PEP 508: {item!r}") from exc
        rendered.append(canonical)
    return tuple(sorted(rendered))


def _render(requirement: Requirement, name: str) -> str:
    text = name
    if requirement.extras:
        text += "[" + ",".join(sorted({canonicalize_name(e) for e in requirement.extras})) + "]"
    if requirement.url:
        text += f" @ {requirement.url}"
    else:
        text += str(requirement.specifier)
    if requirement.marker is not None:
        # PEP 508 needs whitespace between a URL and ";" for the result to parse again.
        separator = " ; " if requirement.url else "; "
        text += f"{separator}{requirement.marker}"
    return text


def declared_distributions(dependencies: Sequence[str]) -> frozenset[str]:
    """Canonical distribution names of ``dependencies``; unparsable entries are skipped."""
    names: set[str] = set()
    for dependency in dependencies:
        try:
            names.add(canonicalize_name(Requirement(dependency).name))
        except InvalidRequirement:
            continue
    return frozenset(names)
