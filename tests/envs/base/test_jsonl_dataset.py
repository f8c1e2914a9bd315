"""Tests for ``JsonlDataset``, ``JsonRow`` and ``resolve_dataset_path``."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from benchmax.envs.base import dataset as dataset_module
from benchmax.envs.base.dataset import JsonlDataset, JsonRow, resolve_dataset_path
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.identity import canonical_example_id
from benchmax.envs.shared_types import DatasetSplit, Example, RolloutAttempt


def by_hash(row: JsonRow) -> Example[JsonRow]:
    return Example(id=canonical_example_id(row), payload=row)


class SpyRowToExample:
    """Records every row it is given and builds an example from the row's ``id``."""

    def __init__(self) -> None:
        self.rows: list[JsonRow] = []

    def __call__(self, row: JsonRow) -> Example[JsonRow]:
        self.rows.append(row)
        return Example(id=str(row["id"]), payload=row)


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def train(tmp_path: Path) -> Path:
    return tmp_path / "train.jsonl"


# Loading ---------------------------------------------------------------------


def test_loads_rows_in_order_skipping_blank_lines(train: Path) -> None:
    write(
        train, '{"id": "a", "n": 1}\n\n   \t\n  {"id": "b", "nested": {"k": [1, 2]}}  \n{"id": "c"}'
    )
    spy = SpyRowToExample()
    dataset = JsonlDataset(train, row_to_example=spy)
    assert spy.rows == [{"id": "a", "n": 1}, {"id": "b", "nested": {"k": [1, 2]}}, {"id": "c"}]
    assert [e.id for e in dataset] == ["a", "b", "c"]
    assert dataset[0].payload is spy.rows[0]
    assert isinstance(dataset, Dataset)
    assert len(dataset) == 3


def test_keeps_examples_exactly_as_returned(train: Path) -> None:
    write(train, '{"q": 1}\n{"q": 2}\n')
    produced: list[Example[Any]] = []

    def row_to_example(row: JsonRow) -> Example[Any]:
        example = Example(id=f"custom-{row['q']}", payload=("wrapped", row["q"]))
        produced.append(example)
        return example

    dataset = JsonlDataset(str(train), row_to_example=row_to_example)  # str path accepted
    assert list(dataset) == produced
    assert all(a is b for a, b in zip(dataset, produced, strict=True))


def test_typical_canonical_ids(train: Path) -> None:
    write(train, '{"b": 1, "a": 2.0}\n{"a": 2, "b": 1}\n')
    first, second = JsonlDataset(train, row_to_example=by_hash)
    assert first.id == second.id == canonical_example_id({"a": 2, "b": 1})


def test_empty_file_gives_empty_dataset(train: Path) -> None:
    write(train, "\n\n")
    assert len(JsonlDataset(train, row_to_example=by_hash)) == 0


# Errors name the file and line -----------------------------------------------


def test_invalid_json_names_file_and_line(train: Path) -> None:
    write(train, "{not-json}\n")
    with pytest.raises(ValueError, match=r"train\.jsonl:1 contains invalid JSON: ") as info:
        JsonlDataset(train, row_to_example=by_hash)
    assert str(info.value) == (
        f"{train}:1 contains invalid JSON: Expecting property name enclosed in double quotes"
    )
    assert isinstance(info.value.__cause__, json.JSONDecodeError)


def test_non_object_row_is_type_error(train: Path) -> None:
    write(train, "[]\n")
    with pytest.raises(TypeError, match=r"train\.jsonl:1 must be a JSON object") as info:
        JsonlDataset(train, row_to_example=by_hash)
    assert str(info.value) == f"{train}:1 must be a JSON object"


@pytest.mark.parametrize("line", ['"text"', "3", "null", "true"])
def test_scalar_rows_are_rejected(train: Path, line: str) -> None:
    write(train, line)
    with pytest.raises(TypeError, match=r"train\.jsonl:1 must be a JSON object"):
        JsonlDataset(train, row_to_example=by_hash)


def test_line_numbers_count_blank_lines(train: Path) -> None:
    write(train, '{"id": 1}\n\n  \n{"id": 2}\n{oops\n')
    with pytest.raises(ValueError, match=r"train\.jsonl:5 contains invalid JSON"):
        JsonlDataset(train, row_to_example=by_hash)


def test_path_in_messages_is_as_given_not_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    write(tmp_path / "data" / "train.jsonl", "{}\n[1]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError) as info:
        JsonlDataset("data/./train.jsonl", row_to_example=by_hash)
    assert str(info.value) == "data/train.jsonl:2 must be a JSON object"


def test_row_to_example_errors_get_a_location_note(train: Path) -> None:
    write(train, '{"id": "a"}\n\n{"id": "b"}\n')
    original = KeyError("missing field")

    def row_to_example(row: JsonRow) -> Example[JsonRow]:
        if row["id"] == "b":
            raise original
        return Example(id=row["id"], payload=row)

    with pytest.raises(KeyError) as info:
        JsonlDataset(train, row_to_example=row_to_example)
    assert info.value is original
    assert info.value.__notes__ == [f"while loading {train}:3"]


def test_row_to_example_must_return_an_example(train: Path) -> None:
    write(train, '{"id": "a"}\n')
    with pytest.raises(TypeError) as info:
        JsonlDataset(train, row_to_example=lambda row: row)  # type: ignore[arg-type,return-value]
    assert str(info.value) == f"{train}:1 row_to_example returned dict, expected Example"


def test_missing_file_and_invalid_utf8(tmp_path: Path, train: Path) -> None:
    with pytest.raises(FileNotFoundError):
        JsonlDataset(tmp_path / "absent.jsonl", row_to_example=by_hash)
    train.write_bytes(b'{"x": "\xff"}\n')
    with pytest.raises(UnicodeDecodeError):
        JsonlDataset(train, row_to_example=by_hash)


# Line breaks -----------------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_each_line_break_style(train: Path, newline: str) -> None:
    write(train, newline.join(['{"id": 1}', "", '{"id": 2}', "{bad"]) + newline)
    with pytest.raises(ValueError, match=r"train\.jsonl:4 contains invalid JSON"):
        JsonlDataset(train, row_to_example=SpyRowToExample())
    write(train, newline.join(['{"id": 1}', "", '{"id": 2}']))
    assert [e.id for e in JsonlDataset(train, row_to_example=SpyRowToExample())] == ["1", "2"]


def test_mixed_line_breaks_count_physical_lines(train: Path) -> None:
    # Lines: 1 '{"id":1}', 2 '', 3 '{"id":2}', 4 '', 5 '', 6 '[]'
    write(train, '{"id": 1}\r\n\r{"id": 2}\n\r\n\r[]')
    with pytest.raises(TypeError, match=r"train\.jsonl:6 must be a JSON object"):
        JsonlDataset(train, row_to_example=SpyRowToExample())


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_unicode_separators_are_ordinary_characters(train: Path, separator: str) -> None:
    write(train, f'{{"id": "a", "text": "x{separator}y"}}\n{{"id": "b"}}\n[]\n')
    spy = SpyRowToExample()
    with pytest.raises(TypeError, match=r"train\.jsonl:3 must be a JSON object"):
        JsonlDataset(train, row_to_example=spy)
    assert spy.rows[0]["text"] == f"x{separator}y"
    assert [row["id"] for row in spy.rows] == ["a", "b"]


@pytest.mark.parametrize("offset", range(-3, 4))
def test_crlf_straddling_a_read_buffer_is_one_break(train: Path, offset: int) -> None:
    # Put the "\r" of a "\r\n" pair at and around the 8 KiB read-chunk boundary.
    for chunk in (8192, 2 * 8192):
        filler = "x" * (chunk - len('{"id": "a", "pad": ""}') + offset - 1)
        first = f'{{"id": "a", "pad": "{filler}"}}'
        write(train, f'{first}\r\n{{"id": "b"}}\r\n\r\n[]\r\n')
        spy = SpyRowToExample()
        with pytest.raises(TypeError, match=r"train\.jsonl:4 must be a JSON object"):
            JsonlDataset(train, row_to_example=spy)
        assert [row["id"] for row in spy.rows] == ["a", "b"]


# max_examples ----------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, False, 1.0, 2.5, "2", [1]])
def test_max_examples_validated_before_touching_the_file(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match=r"^max_examples must be a positive integer or None$"):
        JsonlDataset(
            tmp_path / "does-not-exist.jsonl",
            row_to_example=by_hash,
            max_examples=bad,  # type: ignore[arg-type]
        )


def test_max_examples_stops_reading_later_lines(train: Path) -> None:
    write(train, '{"id": 1}\n\n{"id": 2}\n{"id": 3}\n{not json at all\n[]\n')
    spy = SpyRowToExample()
    dataset = JsonlDataset(train, row_to_example=spy, max_examples=2)
    assert [e.id for e in dataset] == ["1", "2"]
    assert len(spy.rows) == 2  # row 3 is never passed on


def test_max_examples_none_or_large_loads_everything(train: Path) -> None:
    write(train, '{"id": 1}\n{"id": 2}\n{"id": 3}\n')
    assert len(JsonlDataset(train, row_to_example=SpyRowToExample(), max_examples=None)) == 3
    assert len(JsonlDataset(train, row_to_example=SpyRowToExample(), max_examples=10)) == 3
    assert len(JsonlDataset(train, row_to_example=SpyRowToExample(), max_examples=1)) == 1


def test_loading_streams_instead_of_reading_the_whole_file(tmp_path: Path) -> None:
    """A FIFO that never reaches end-of-file still yields the first examples."""
    fifo = tmp_path / "train.jsonl"
    os.mkfifo(fifo)
    release = threading.Event()

    def writer() -> None:
        with open(fifo, "w", encoding="utf-8") as stream:
            stream.write('{"id": "a"}\n{"id": "b"}\n')
            stream.flush()
            release.wait(120)  # keep the pipe open: reading to EOF would block

    results: list[Any] = []

    def reader() -> None:
        try:
            results.append(JsonlDataset(fifo, row_to_example=SpyRowToExample(), max_examples=2))
        except BaseException as error:  # pragma: no cover - reported below
            results.append(error)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    try:
        threads[1].join(60)
        assert not threads[1].is_alive(), "JsonlDataset waited for end of file"
    finally:
        release.set()
        for thread in threads:
            thread.join(60)
    assert [e.id for e in results[0]] == ["a", "b"]


def test_jsonl_dataset_is_generic() -> None:
    assert issubclass(JsonlDataset, Dataset)
    assert JsonlDataset[JsonRow].__origin__ is JsonlDataset


# JsonRow and resolve_dataset_path --------------------------------------------


def test_json_row_is_plain_dict_alias() -> None:
    assert JsonRow == dict[str, Any]
    assert dataset_module.__all__ == ["JsonRow", "JsonlDataset", "resolve_dataset_path"]


def test_resolve_inside_base_dir(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    assert resolve_dataset_path(tmp_path, "data/train.jsonl") == root / "data" / "train.jsonl"
    assert resolve_dataset_path(tmp_path, "a/../b.jsonl") == root / "b.jsonl"
    assert resolve_dataset_path(tmp_path, ".") == root  # equal to root counts as inside
    assert resolve_dataset_path(tmp_path, "").is_absolute()


def test_resolve_rejects_absolute_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dataset paths must be relative to base_dir"):
        resolve_dataset_path(tmp_path, str(tmp_path / "train.jsonl"))


@pytest.mark.parametrize("relative", ["..", "../x.jsonl", "data/../../x.jsonl"])
def test_resolve_rejects_escapes(tmp_path: Path, relative: str) -> None:
    base = tmp_path / "base"
    base.mkdir()
    with pytest.raises(ValueError, match="dataset paths must stay within base_dir") as info:
        resolve_dataset_path(base, relative)
    assert isinstance(info.value.__cause__, ValueError)


def test_resolve_follows_symlinks(tmp_path: Path) -> None:
    base = tmp_path / "base"
    outside = tmp_path / "outside"
    base.mkdir()
    outside.mkdir()
    (base / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="dataset paths must stay within base_dir"):
        resolve_dataset_path(base, "link/train.jsonl")
    (base / "inner").mkdir()
    (base / "inside").symlink_to(base / "inner", target_is_directory=True)
    assert resolve_dataset_path(base, "inside/t.jsonl") == (base / "inner" / "t.jsonl").resolve()


def test_resolve_expands_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_dataset_path(Path("~"), "d.jsonl") == tmp_path.resolve() / "d.jsonl"


# create_dataset overrides ----------------------------------------------------


class _NoRollouts:
    reward_keys = ("correct",)

    async def run_rollout(self, request: Any) -> Any:  # pragma: no cover - never run
        raise NotImplementedError


class CappedEnv(_NoRollouts, Environment[JsonRow, RolloutAttempt]):
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=by_hash, max_examples=max_examples
        )


class UncappedEnv(_NoRollouts, Environment[JsonRow, RolloutAttempt]):
    async def create_dataset(self, split: DatasetSplit, base_dir: Path) -> Dataset[JsonRow]:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=by_hash)


async def test_create_dataset_overrides_with_or_without_max_examples(tmp_path: Path) -> None:
    write(tmp_path / "eval.jsonl", '{"n": 1}\n{"n": 2}\n{"n": 3}\n')
    assert CappedEnv.__abstractmethods__ == UncappedEnv.__abstractmethods__ == frozenset()
    capped = await CappedEnv().create_dataset("eval", tmp_path, max_examples=2)
    assert [e.payload["n"] for e in capped] == [1, 2]
    assert len(await CappedEnv().create_dataset("eval", tmp_path)) == 3
    assert len(await UncappedEnv().create_dataset("eval", tmp_path)) == 3
