"""Lost workers, crashing workers, bundles that do not load, contract errors, back-pressure."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.ray.ray_envs import CrashEnv, IntervalEnv, PacedEnv, PickyEnv
from tests.runner.sample_envs import NumberEnv, number_config

from benchmax.auth import StaticBearerAuth
from benchmax.bundle import Bundle, dump_bundle
from benchmax.results import read_results
from benchmax.runner import (
    ExecutorError,
    GroupContractError,
    Progress,
    RayExecutor,
    run_environment,
)

pytestmark = pytest.mark.ray

NODE = r"Ray worker on node \S+ \(node [0-9a-f]{12}\)"


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def assert_every_group_once(path: Path, examples: int, group_size: int) -> None:
    """Each example's group is written exactly once, whole, and read back complete."""
    lines = raw_lines(path)
    assert Counter(r["example_index"] for r in lines) == dict.fromkeys(range(examples), group_size)
    for index in range(examples):
        group = [r for r in lines if r["example_index"] == index]
        assert len({r["attempt"] for r in group}) == 1
        assert sorted(r["group_index"] for r in group) == list(range(group_size))
    assert len(read_results(path).rollouts) == examples * group_size


async def test_a_killed_worker_loses_only_its_groups_which_run_again(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    config = number_config(tmp_path, group_size=2)
    killed: list[str] = []

    def kill_first_worker(progress: Progress) -> None:
        if progress.examples_done == 1 and not killed:  # example 0 done, the rest in flight
            run_id = json.loads(config.output.read_text().splitlines()[0])["run_id"]
            killed.append(run_id)
            ray_cluster.kill(ray_cluster.get_actor(f"benchmax-{run_id}-w1"))

    executor = RayExecutor(workers=2, worker_concurrency=2, constructor_args={"count": 8})
    report = await run_environment(
        PacedEnv(8), config, on_progress=kill_first_worker, executor=executor
    )
    assert killed
    assert report.groups == 8
    assert_every_group_once(config.output, 8, 2)
    lines = raw_lines(config.output)
    retried = {r["example_index"] for r in lines if r["attempt"] == 2}
    assert retried  # the groups in flight on the killed worker ran again...
    assert {r["attempt"] for r in lines} == {1, 2}  # ...once each, with new rollout ids
    assert all(".a2-" in r["rollout_id"] for r in lines if r["example_index"] in retried)
    assert len({r["rollout_id"] for r in lines}) == len(lines)
    expected = {r["example_index"]: r["rewards"] for r in lines if r["group_index"] == 0}
    assert expected == {i: {"hit": float(i % 3 == 0), "value": float(i)} for i in range(8)}


async def test_a_worker_process_that_dies_in_a_rollout_is_replaced(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    config = number_config(tmp_path, group_size=2)
    executor = RayExecutor(workers=1, worker_concurrency=3, constructor_args={"count": 6})
    report = await run_environment(CrashEnv(6), config, executor=executor)
    assert report.groups == 6
    assert_every_group_once(config.output, 6, 2)
    attempts = {r["example_index"]: r["attempt"] for r in raw_lines(config.output)}
    assert attempts[2] == 2  # the group that crashed its worker, run again on the replacement


async def test_when_every_worker_is_lost_the_run_stops_and_keeps_finished_groups(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    config = number_config(tmp_path, group_size=2)
    executor = RayExecutor(
        workers=1, worker_concurrency=1, constructor_args={"count": 6}, max_worker_replacements=0
    )
    with pytest.raises(ExecutorError, match=r"^every Ray worker was lost; the last: worker 1 on"):
        await run_environment(CrashEnv(6), config, executor=executor)
    lines = raw_lines(config.output)
    assert sorted({r["example_index"] for r in lines}) == [0, 1]  # finished before the crash
    resumed = await run_environment(CrashEnv(6, crash_on=-1), config)  # the file resumes
    assert resumed.groups_resumed == 2 and resumed.groups == 6


def incompatible(bundle: Bundle) -> Bundle:
    return Bundle(bundle.pickled, dataclasses.replace(bundle.metadata, benchmax_version="0.1.0"))


@pytest.mark.parametrize(
    ("make_bundle", "constructor_args", "reason"),
    [
        (
            lambda: incompatible(dump_bundle(NumberEnv)),
            {},
            r"IncompatibleBenchmaxError: Bundle was packaged with BenchMax 0\.1\.0 but this "
            r"runtime uses BenchMax \S+; major\.minor versions must match\.",
        ),
        (
            lambda: Bundle(b"not a pickle", dump_bundle(NumberEnv).metadata),
            {},
            r"BundlingError: Failed to unpickle bundle: ",
        ),
        (
            lambda: dump_bundle(NumberEnv),
            {"colour": "red"},
            r"TypeError: .*unexpected keyword argument 'colour'",
        ),
    ],
    ids=["incompatible", "corrupt", "constructor"],
)
async def test_a_worker_that_cannot_load_the_bundle_stops_the_run_naming_its_node(
    make_bundle: Any,
    constructor_args: dict[str, Any],
    reason: str,
    tmp_path: Path,
    ray_cluster: ModuleType,
) -> None:
    config = number_config(tmp_path)
    executor = RayExecutor(workers=2, bundle=make_bundle(), constructor_args=constructor_args)
    with pytest.raises(ExecutorError) as caught:
        await run_environment(NumberEnv(4), config, executor=executor)
    message = str(caught.value)
    assert "\n" not in message
    assert re.match(rf"^{NODE} cannot load the environment bundle: {reason}", message), message
    assert raw_lines(config.output) == []  # nothing ran


async def test_secrets_in_a_worker_load_error_are_masked(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    secret = "sk-picky-0123456789"
    config = number_config(tmp_path, model_auth=StaticBearerAuth(secret))
    executor = RayExecutor(workers=1, constructor_args={"key": secret})
    with pytest.raises(ExecutorError) as caught:
        await run_environment(PickyEnv("right"), config, executor=executor)
    assert str(caught.value).endswith(
        "cannot load the environment bundle: ValueError: key *** is not right"
    )


async def test_a_contract_error_on_a_worker_stops_the_run_as_it_does_locally(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    class BrokenLast(NumberEnv):
        def __init__(self) -> None:
            super().__init__(6)
            self.payloads = [{"value": n} for n in range(5)] + [{"broken": True}]

    local_config = number_config(tmp_path, output=tmp_path / "local.jsonl")
    with pytest.raises(GroupContractError) as local:
        await run_environment(BrokenLast(), local_config)

    executor = RayExecutor(workers=2, worker_concurrency=1)
    remote_config = number_config(tmp_path)
    with pytest.raises(GroupContractError) as remote:
        await run_environment(BrokenLast(), remote_config, executor=executor)
    assert remote_config.output is not None
    # The same one line, naming the hook, but for the results file it points to.
    assert str(remote.value) == str(local.value).replace(
        str(tmp_path / "local.error.log"), str(remote_config.output.with_suffix(".error.log"))
    )
    assert "broke the environment contract in BrokenLast.run_rollout" in str(remote.value)
    assert isinstance(remote.value.__cause__, KeyError)


async def test_no_more_groups_in_flight_than_workers_times_concurrency(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    config = number_config(tmp_path, group_size=2)
    executor = RayExecutor(
        workers=2, worker_concurrency=2, constructor_args={"count": 16, "delay": 0.3}
    )
    await run_environment(IntervalEnv(16, delay=0.3), config, executor=executor)
    groups: dict[int, dict[str, float]] = {}
    for r in raw_lines(config.output):
        rewards = r["rewards"]
        group = groups.setdefault(
            r["example_index"], {"start": rewards["start"], "end": rewards["end"]}
        )
        group["start"] = min(group["start"], rewards["start"])
        group["end"] = max(group["end"], rewards["end"])
        group["pid"] = rewards["pid"]
    assert len({g["pid"] for g in groups.values()}) == 2  # both workers ran groups

    def peak(selected: list[dict[str, float]]) -> int:
        events = sorted([(g["start"], 1) for g in selected] + [(g["end"], -1) for g in selected])
        level = best = 0
        for _, step in events:
            level += step
            best = max(best, level)
        return best

    assert 2 <= peak(list(groups.values())) <= 4
    for pid in {g["pid"] for g in groups.values()}:
        assert peak([g for g in groups.values() if g["pid"] == pid]) <= 2


async def test_a_worker_no_node_can_host_stops_the_run_after_the_start_timeout(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    executor = RayExecutor(
        workers=1, worker_options={"resources": {"no-such-resource": 1}}, worker_start_timeout=2
    )
    with pytest.raises(ExecutorError, match=r"^Ray worker 1 did not start within 2 s \(can any"):
        await run_environment(NumberEnv(2), number_config(tmp_path), executor=executor)


class _Unpicklable(StaticBearerAuth):
    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle a key ({self.token})")


async def test_credentials_that_cannot_travel_stop_the_run_with_the_reason(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    config = number_config(tmp_path, auth_providers={"judge": _Unpicklable("sk-unsent-42")})
    with pytest.raises(ExecutorError) as caught:
        await run_environment(NumberEnv(2), config, executor=RayExecutor(workers=1))
    assert str(caught.value) == (
        "cannot send the run to the Ray workers: TypeError: cannot pickle a key (***)"
    )
