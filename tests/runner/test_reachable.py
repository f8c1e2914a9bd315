"""reachable_values: what a run finds inside an environment without running it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from benchmax._reachable import reachable_values
from benchmax.auth import InjectedAuth


class Refusing(Mapping[str, object]):
    """A third-party placeholder that raises when looked into (as pydantic's mock
    validators do on ``len``)."""

    def __getitem__(self, key: str) -> object:
        raise RuntimeError("not built")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("not built")

    def __len__(self) -> int:
        raise RuntimeError("not built")


class Holder:
    placeholder = Refusing()

    def __init__(self) -> None:
        self.auth = InjectedAuth("judge")
        self.parts = [Refusing(), {"inner": InjectedAuth("grader")}]


def test_objects_that_refuse_to_be_looked_into_are_skipped_not_fatal() -> None:
    found = [value for value in reachable_values(Holder()) if isinstance(value, InjectedAuth)]
    assert sorted(auth.name for auth in found) == ["grader", "judge"]
