"""Tests for the ``Dataset`` base class."""

from __future__ import annotations

from typing import Any

import pytest

from benchmax.envs import dataset as dataset_module
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example


def examples(*ids: str) -> list[Example[dict[str, Any]]]:
    return [Example(id=i, payload={"id": i}) for i in ids]


def test_snapshots_membership_and_order() -> None:
    source = examples("a", "b", "c")
    first = source[0]
    dataset = Dataset(source)
    source.reverse()
    source.append(Example(id="d", payload={}))
    assert [example.id for example in dataset] == ["a", "b", "c"]
    assert len(dataset) == 3
    assert dataset[0] is first


def test_indexing_and_iteration() -> None:
    dataset = Dataset(examples("a", "b", "c"))
    assert dataset[-1].id == "c"
    assert [e.id for e in dataset] == [e.id for e in dataset]  # re-iterable
    with pytest.raises(IndexError):
        dataset[3]


def test_accepts_any_iterable_and_does_not_copy_payloads() -> None:
    payload = {"k": [1]}
    dataset = Dataset(Example(id=str(i), payload=payload) for i in range(2))
    assert len(dataset) == 2
    assert dataset[1].payload is payload


def test_elements_are_not_validated() -> None:
    assert len(Dataset(["not an example"])) == 1  # type: ignore[list-item]


def test_empty_dataset() -> None:
    dataset = Dataset([])
    assert len(dataset) == 0
    assert list(dataset) == []


def test_generic_subscript_is_a_usable_base_class() -> None:
    class Custom(Dataset[dict[str, Any]]):
        def __init__(self, ids: list[str]) -> None:
            super().__init__(examples(*ids))

    custom = Custom(["x", "y"])
    assert isinstance(custom, Dataset)
    assert [e.id for e in custom] == ["x", "y"]


def test_module_all() -> None:
    assert dataset_module.__all__ == ["Dataset"]
    assert Dataset.__module__ == "benchmax.envs.dataset"
