"""Datasets through HarborEnv: automatic splits, explicit eval datasets and caching."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harbor.models.job.config import DatasetConfig
from harbor.tasks.client import TaskClient
from tests.envs.harbor.conftest import write_dataset

from benchmax.envs.harbor import HarborDataset, HarborEnv


@pytest.fixture
def download_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count Harbor task downloads (one per dataset resolution) while still running them."""
    calls: list[int] = []
    original = TaskClient.download_tasks

    async def counting(self: TaskClient, task_ids: list[Any], **kwargs: Any) -> Any:
        calls.append(len(task_ids))
        return await original(self, task_ids, **kwargs)

    monkeypatch.setattr(TaskClient, "download_tasks", counting)
    return calls


@pytest.fixture
def ten_tasks(tmp_path: Path) -> DatasetConfig:
    return DatasetConfig(path=write_dataset(tmp_path / "primary", 10))


def _ids(dataset: HarborDataset) -> list[str]:
    return [example.id for example in dataset]


async def test_default_ratio_splits_nine_one_from_one_resolution(
    make_env: Callable[..., HarborEnv],
    ten_tasks: DatasetConfig,
    tmp_path: Path,
    download_calls: list[int],
) -> None:
    env = make_env(dataset=ten_tasks)
    base = tmp_path / "datasets"
    train = await env.create_dataset("train", base)
    evaluation = await env.create_dataset("eval", base)
    assert isinstance(train, HarborDataset) and isinstance(evaluation, HarborDataset)
    assert (len(train), len(evaluation)) == (9, 1)
    assert not set(_ids(train)) & set(_ids(evaluation))
    assert len(set(_ids(train)) | set(_ids(evaluation))) == 10
    directories = {example.payload.path.parent for example in [*train, *evaluation]}
    assert directories == {base.resolve() / "main" / "tasks"}
    assert download_calls == [10]  # the primary dataset was resolved once


async def test_ratio_point_three_puts_the_lowest_ids_in_eval(
    make_env: Callable[..., HarborEnv], ten_tasks: DatasetConfig, tmp_path: Path
) -> None:
    env = make_env(dataset=ten_tasks, eval_ratio=0.3)
    train = await env.create_dataset("train", tmp_path / "d")
    evaluation = await env.create_dataset("eval", tmp_path / "d")
    assert (len(train), len(evaluation)) == (7, 3)
    everything = sorted(_ids(train) + _ids(evaluation))
    assert _ids(evaluation) == everything[:3]
    assert _ids(train) == everything[3:]


async def test_explicit_eval_dataset_overrides_the_ratio(
    make_env: Callable[..., HarborEnv], tmp_path: Path
) -> None:
    primary = DatasetConfig(path=write_dataset(tmp_path / "primary", 3, prefix="train"))
    held_out = DatasetConfig(path=write_dataset(tmp_path / "held-out", 2, prefix="eval"))
    env = make_env(dataset=primary, eval_dataset=held_out, eval_ratio=0.9)
    base = tmp_path / "datasets"
    train = await env.create_dataset("train", base)
    evaluation = await env.create_dataset("eval", base)
    assert (len(train), len(evaluation)) == (3, 2)
    assert {e.payload.path.parent for e in train} == {base.resolve() / "train" / "tasks"}
    assert {e.payload.path.parent for e in evaluation} == {base.resolve() / "eval" / "tasks"}
    train_texts = {(e.payload.path / "instruction.md").read_text() for e in train}
    eval_texts = {(e.payload.path / "instruction.md").read_text() for e in evaluation}
    assert train_texts == {f"train instruction {i}\n" for i in range(3)}
    assert eval_texts == {f"eval instruction {i}\n" for i in range(2)}


async def test_zero_ratio_disables_automatic_eval(
    make_env: Callable[..., HarborEnv], ten_tasks: DatasetConfig, tmp_path: Path
) -> None:
    env = make_env(dataset=ten_tasks, eval_ratio=0)
    assert len(await env.create_dataset("train", tmp_path / "d")) == 10
    with pytest.raises(ValueError) as caught:
        await env.create_dataset("eval", tmp_path / "d")
    assert str(caught.value) == "HarborEnv automatic eval is disabled by eval_ratio=0"


async def test_single_example_cannot_be_split(
    make_env: Callable[..., HarborEnv], tmp_path: Path
) -> None:
    env = make_env(dataset=DatasetConfig(path=write_dataset(tmp_path / "one", 1)))
    assert len(await env.create_dataset("train", tmp_path / "d")) == 1
    with pytest.raises(ValueError) as caught:
        await env.create_dataset("eval", tmp_path / "d")
    assert str(caught.value) == "HarborEnv automatic eval requires at least two dataset examples"


@pytest.mark.parametrize("split", ["test", "TRAIN", ""])
async def test_unknown_split_is_rejected(
    make_env: Callable[..., HarborEnv], tmp_path: Path, split: str
) -> None:
    with pytest.raises(ValueError) as caught:
        await make_env().create_dataset(split, tmp_path)  # type: ignore[arg-type]
    assert str(caught.value) == f"unknown dataset split: {split!r}"


async def test_concurrent_requests_share_one_resolution(
    make_env: Callable[..., HarborEnv],
    ten_tasks: DatasetConfig,
    tmp_path: Path,
    download_calls: list[int],
) -> None:
    env = make_env(dataset=ten_tasks)
    train, evaluation = await asyncio.gather(
        env.create_dataset("train", tmp_path / "d"),
        env.create_dataset("eval", tmp_path / "d" / ".." / "d"),
    )
    assert (len(train), len(evaluation)) == (9, 1)
    assert download_calls == [10]
    await env.create_dataset("train", tmp_path / "other")
    assert download_calls == [10, 10]  # a different snapshot directory resolves again


def test_cache_and_lock_work_across_event_loops(
    make_env: Callable[..., HarborEnv],
    ten_tasks: DatasetConfig,
    tmp_path: Path,
    download_calls: list[int],
) -> None:
    env = make_env(dataset=ten_tasks)

    async def both_splits(base_dir: Path) -> tuple[int, int]:
        # Concurrent calls contend for the cache lock on this loop.
        train, evaluation = await asyncio.gather(
            env.create_dataset("train", base_dir), env.create_dataset("eval", base_dir)
        )
        return len(train), len(evaluation)

    assert asyncio.run(both_splits(tmp_path / "d")) == (9, 1)
    assert asyncio.run(both_splits(tmp_path / "d")) == (9, 1)
    assert download_calls == [10]  # the cache outlives the first loop
    assert asyncio.run(both_splits(tmp_path / "other")) == (9, 1)
    assert download_calls == [10, 10]


async def test_max_examples_takes_the_first_examples_of_the_split_in_order(
    make_env: Callable[..., HarborEnv],
    ten_tasks: DatasetConfig,
    tmp_path: Path,
    download_calls: list[int],
) -> None:
    env = make_env(dataset=ten_tasks, eval_ratio=0.3)
    head = await env.create_dataset("train", tmp_path / "d", max_examples=4)
    everything = await env.create_dataset("train", tmp_path / "d")
    assert isinstance(head, HarborDataset)
    assert len(everything) == 7
    assert _ids(head) == _ids(everything)[:4]
    assert [e.payload for e in head] == [e.payload for e in everything][:4]
    evaluation = await env.create_dataset("eval", tmp_path / "d", max_examples=2)
    assert _ids(evaluation) == _ids(await env.create_dataset("eval", tmp_path / "d"))[:2]
    assert download_calls == [10]  # capped and full splits share the one resolution


async def test_max_examples_beyond_the_split_returns_all_of_it(
    make_env: Callable[..., HarborEnv], ten_tasks: DatasetConfig, tmp_path: Path
) -> None:
    env = make_env(dataset=ten_tasks)
    evaluation = await env.create_dataset("eval", tmp_path / "d", max_examples=5)
    train = await env.create_dataset("train", tmp_path / "d", max_examples=9)
    assert (len(evaluation), len(train)) == (1, 9)
    assert _ids(train) == _ids(await env.create_dataset("train", tmp_path / "d"))


async def test_max_examples_caps_an_explicit_eval_dataset(
    make_env: Callable[..., HarborEnv], tmp_path: Path
) -> None:
    primary = DatasetConfig(path=write_dataset(tmp_path / "primary", 3, prefix="train"))
    held_out = DatasetConfig(path=write_dataset(tmp_path / "held-out", 4, prefix="eval"))
    env = make_env(dataset=primary, eval_dataset=held_out)
    base = tmp_path / "datasets"
    evaluation = await env.create_dataset("eval", base, max_examples=1)
    train = await env.create_dataset("train", base, max_examples=2)
    assert _ids(evaluation) == _ids(await env.create_dataset("eval", base))[:1]
    assert _ids(train) == _ids(await env.create_dataset("train", base))[:2]
    assert {e.payload.path.parent for e in evaluation} == {base.resolve() / "eval" / "tasks"}


async def test_max_examples_does_not_hide_an_empty_automatic_eval(
    make_env: Callable[..., HarborEnv], tmp_path: Path
) -> None:
    env = make_env(dataset=DatasetConfig(path=write_dataset(tmp_path / "one", 1)))
    with pytest.raises(ValueError) as caught:
        await env.create_dataset("eval", tmp_path / "d", max_examples=1)
    assert str(caught.value) == "HarborEnv automatic eval requires at least two dataset examples"


@pytest.mark.parametrize("max_examples", [0, -1, True, False, 1.0, "2", [1]])
async def test_invalid_max_examples_is_rejected_before_resolving(
    make_env: Callable[..., HarborEnv],
    ten_tasks: DatasetConfig,
    tmp_path: Path,
    download_calls: list[int],
    max_examples: object,
) -> None:
    env = make_env(dataset=ten_tasks)
    with pytest.raises(ValueError) as caught:
        await env.create_dataset("train", tmp_path / "d", max_examples=max_examples)  # type: ignore[arg-type]
    assert str(caught.value) == "max_examples must be a positive integer or None"
    assert download_calls == []
    assert not (tmp_path / "d").exists()
