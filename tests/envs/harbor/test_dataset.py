"""HarborDataset: content-addressed snapshots of real local task directories."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from harbor.models.job.config import DatasetConfig
from harbor.models.trial.config import TaskConfig
from harbor.tasks.client import TaskClient
from tests.envs.harbor.conftest import write_dataset, write_task

from benchmax.envs.harbor import HarborDataset, _snapshot
from benchmax.envs.harbor._snapshot import snapshot_task, task_content_hash
from benchmax.envs.shared_types import Example

HEX64 = re.compile(r"[0-9a-f]{64}")


async def _create(source: Path, base_dir: Path) -> HarborDataset:
    return await HarborDataset.create(DatasetConfig(path=source), base_dir=base_dir)


async def test_identical_content_in_two_directories_gets_the_same_id(tmp_path: Path) -> None:
    write_task(tmp_path / "machine-a" / "some-task", instruction="same")
    write_task(tmp_path / "machine-b" / "renamed-task", instruction="same")
    first = await _create(tmp_path / "machine-a", tmp_path / "snap-a")
    second = await _create(tmp_path / "machine-b", tmp_path / "snap-b")
    assert len(first) == len(second) == 1
    assert first[0].id == second[0].id
    assert HEX64.fullmatch(first[0].id)

    # Snapshot payloads are distinct per base_dir and lie under <base_dir>/tasks/<hash>.
    path_a, path_b = first[0].payload.path, second[0].payload.path
    assert path_a != path_b
    assert path_a == (tmp_path / "snap-a").resolve() / "tasks" / first[0].id
    assert path_b == (tmp_path / "snap-b").resolve() / "tasks" / first[0].id
    assert (tmp_path / "snap-a" / "downloads").is_dir()


async def test_payload_is_a_task_config_with_only_path_and_source(tmp_path: Path) -> None:
    write_task(tmp_path / "my-dataset" / "t")
    config = DatasetConfig(path=tmp_path / "my-dataset")
    dataset = await HarborDataset.create(config, base_dir=tmp_path / "snap")
    payload = dataset[0].payload
    assert isinstance(payload, TaskConfig)
    assert payload == TaskConfig(path=payload.path, source="my-dataset")
    assert config.download_dir is None  # the caller's config is not modified


async def test_snapshot_is_independent_of_later_source_edits(tmp_path: Path) -> None:
    task = write_task(tmp_path / "ds" / "t", instruction="original")
    dataset = await _create(tmp_path / "ds", tmp_path / "snap")
    (task / "instruction.md").write_text("edited\n")
    (task / "tests" / "extra.txt").write_text("new file")
    snapshot = dataset[0].payload.path
    assert (snapshot / "instruction.md").read_text() == "original\n"
    assert not (snapshot / "tests" / "extra.txt").exists()

    edited = await _create(tmp_path / "ds", tmp_path / "snap")
    assert edited[0].id != dataset[0].id  # different content, different id
    assert (snapshot / "instruction.md").read_text() == "original\n"


async def test_examples_are_ordered_by_id_and_ids_are_unique(tmp_path: Path) -> None:
    write_dataset(tmp_path / "ds", 6)
    dataset = await _create(tmp_path / "ds", tmp_path / "snap")
    ids = [example.id for example in dataset]
    assert ids == sorted(ids) and len(set(ids)) == 6
    assert all(HEX64.fullmatch(example_id) for example_id in ids)


async def test_duplicate_content_is_rejected(tmp_path: Path) -> None:
    write_task(tmp_path / "ds" / "a", instruction="same")
    write_task(tmp_path / "ds" / "b", instruction="same")
    with pytest.raises(
        ValueError, match=r"^Harbor dataset contains duplicate task content: [0-9a-f]{64}$"
    ):
        await _create(tmp_path / "ds", tmp_path / "snap")


async def test_empty_dataset_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "not-a-task").mkdir()
    with pytest.raises(ValueError) as caught:
        await _create(tmp_path / "empty", tmp_path / "snap")
    assert str(caught.value) == "Harbor dataset resolved to no tasks"


async def test_non_dataset_config_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(TypeError) as caught:
        await HarborDataset.create({"path": str(tmp_path)}, base_dir=tmp_path / "snap")  # type: ignore[arg-type]
    assert str(caught.value) == "Harbor dataset must be DatasetConfig, got dict"
    assert not (tmp_path / "snap").exists()  # checked before any directory is created


async def test_existing_snapshot_is_reused_and_verified(tmp_path: Path) -> None:
    write_task(tmp_path / "ds" / "t")
    dataset = await _create(tmp_path / "ds", tmp_path / "snap")
    snapshot = dataset[0].payload.path
    marker = snapshot / "environment" / "Dockerfile"
    inode = marker.stat().st_ino
    again = await _create(tmp_path / "ds", tmp_path / "snap")
    assert again[0].payload.path == snapshot
    assert marker.stat().st_ino == inode  # reused, not copied again
    assert not [p for p in (tmp_path / "snap" / "tasks").iterdir() if p.name.startswith(".")]


async def test_tampered_existing_snapshot_is_detected(tmp_path: Path) -> None:
    write_task(tmp_path / "ds" / "t")
    dataset = await _create(tmp_path / "ds", tmp_path / "snap")
    content_id = dataset[0].id
    (dataset[0].payload.path / "instruction.md").write_text("tampered\n")
    with pytest.raises(RuntimeError) as caught:
        await _create(tmp_path / "ds", tmp_path / "snap")
    message = str(caught.value)
    assert message.startswith(
        "Harbor task snapshot content changed while it was being created: "
        f"expected sha256:{content_id}, got sha256:"
    )


async def test_disable_verification_is_forwarded(tmp_path: Path) -> None:
    task = write_task(tmp_path / "ds" / "no-tests")
    shutil.rmtree(task / "tests")
    with pytest.raises(ValueError, match="resolved to no tasks"):
        await _create(tmp_path / "ds", tmp_path / "snap")
    dataset = await HarborDataset.create(
        DatasetConfig(path=tmp_path / "ds"), base_dir=tmp_path / "snap", disable_verification=True
    )
    assert len(dataset) == 1


async def test_download_uses_the_snapshot_downloads_dir_and_overwrite_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_task(tmp_path / "ds" / "t")
    calls: list[dict[str, Any]] = []
    original = TaskClient.download_tasks

    async def recording(self: TaskClient, task_ids: list[Any], **kwargs: Any) -> Any:
        calls.append(kwargs)
        return await original(self, task_ids, **kwargs)

    monkeypatch.setattr(TaskClient, "download_tasks", recording)
    config = DatasetConfig(path=tmp_path / "ds", overwrite=True)
    await HarborDataset.create(config, base_dir=tmp_path / "snap")
    assert calls == [{"overwrite": True, "output_dir": (tmp_path / "snap").resolve() / "downloads"}]


def test_snapshot_keeps_the_winner_of_a_concurrent_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = write_task(tmp_path / "task")
    expected = task_content_hash(task)
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    real_copytree = shutil.copytree

    def racing_copytree(source: Path, staging: Path, *args: Any, **kwargs: Any) -> Any:
        # shutil.copytree recurses through the module attribute: race only once.
        monkeypatch.setattr(shutil, "copytree", real_copytree)
        real_copytree(source, tasks_dir / expected)  # another creator finishes first
        return real_copytree(source, staging, *args, **kwargs)

    monkeypatch.setattr(_snapshot.shutil, "copytree", racing_copytree)
    destination = snapshot_task(task, tasks_dir, expected)
    winner_inode = (destination / "instruction.md").stat().st_ino
    assert destination == tasks_dir / expected
    assert [path.name for path in tasks_dir.iterdir()] == [expected]  # staging removed
    assert snapshot_task(task, tasks_dir, expected) == destination
    assert (destination / "instruction.md").stat().st_ino == winner_inode


def test_failed_snapshot_copy_leaves_no_staging_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = write_task(tmp_path / "task")
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()

    def failing_copytree(source: Path, staging: Path, **kwargs: Any) -> Any:
        Path(staging).mkdir()
        (Path(staging) / "partial").write_text("half")
        raise OSError("disk full")

    monkeypatch.setattr(_snapshot.shutil, "copytree", failing_copytree)
    with pytest.raises(OSError, match="disk full"):
        snapshot_task(task, tasks_dir, task_content_hash(task))
    assert list(tasks_dir.iterdir()) == []


# --- train_eval_split -------------------------------------------------------------------


def _dataset(ids: list[str]) -> HarborDataset:
    return HarborDataset([Example(id=example_id, payload=None) for example_id in ids])


def _ids(dataset: HarborDataset) -> list[str]:
    return [example.id for example in dataset]


@pytest.mark.parametrize(
    ("count", "ratio", "eval_count"),
    [(10, 0.1, 1), (10, 0.3, 3), (3, 0.9, 2), (20, 0.01, 1), (2, 0.5, 1), (10, 0.25, 3)],
)
def test_split_sizes(count: int, ratio: float, eval_count: int) -> None:
    ids = [f"{index:02d}" for index in range(count)]
    train, evaluation = _dataset(list(reversed(ids))).train_eval_split(ratio)
    assert type(train) is HarborDataset and type(evaluation) is HarborDataset
    assert _ids(evaluation) == ids[:eval_count]  # lowest ids, sorted
    assert _ids(train) == ids[eval_count:]


@pytest.mark.parametrize(("ids", "ratio"), [(["b", "a", "c"], 0), (["a"], 0.5), ([], 0.5)])
def test_zero_ratio_or_fewer_than_two_examples_gives_empty_eval(
    ids: list[str], ratio: float
) -> None:
    train, evaluation = _dataset(ids).train_eval_split(ratio)
    assert _ids(train) == sorted(ids)
    assert len(evaluation) == 0


@pytest.mark.parametrize(
    "ratio", [1, 1.0, -0.1, float("nan"), float("inf"), -float("inf"), 10**400, True, "0.1", None]
)
def test_split_rejects_invalid_ratios(ratio: object) -> None:
    with pytest.raises(ValueError) as caught:
        _dataset(["a", "b"]).train_eval_split(ratio)  # type: ignore[arg-type]
    assert str(caught.value) == "eval_ratio must satisfy 0 <= eval_ratio < 1"


def test_direct_construction_freezes_examples() -> None:
    examples = [Example(id="b", payload=1), Example(id="a", payload=2)]
    dataset = HarborDataset(examples)
    examples.clear()
    assert _ids(dataset) == ["b", "a"]
    assert dataset[1].payload == 2
