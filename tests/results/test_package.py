"""benchmax.results: its public names, TrajectoryGroup, the runner's slim surface and the
deprecated names that moved."""

from __future__ import annotations

import importlib
import inspect
import pickle
import warnings
from pathlib import Path

import pytest

import benchmax.results as results
import benchmax.runner as runner
import benchmax.training as training
from benchmax.envs import RolloutOutcome
from benchmax.results import (
    ResultsStore,
    RunDefinition,
    TrajectoryGroup,
    group_advantages,
    groups_of,
    read_results,
    read_results_summary,
    scalar_reward,
    write_results,
)
from benchmax.trajectory import Trajectory

RUNNER_NAMES = [
    "RESCORED_REASONS",
    "ExecutorError",
    "FailureShareExceeded",
    "FixedReply",
    "GroupContractError",
    "HookDeadlines",
    "JudgeCheckError",
    "NoModelAuth",
    "Progress",
    "RayExecutor",
    "RescoreReport",
    "ResumeMismatchError",
    "RunConfig",
    "RunError",
    "RunReport",
    "rescore_results",
    "rollout_seed",
    "run_definition",
    "run_environment",
    "score_replies",
]


def rollout(k: int, reward: float, reason: str = "finished", **fields: object) -> Trajectory:
    return Trajectory(
        rollout_id=f"run.e0.a1.r{k}",
        example_id="ex-0",
        termination_reason=reason,
        rewards={"correct": reward, "format": 1.0},
        example_index=0,
        group_index=k,
        usage={"prompt_tokens": 5, "completion_tokens": k},
        **fields,  # type: ignore[arg-type]
    )


# --- the public surfaces -------------------------------------------------------------------


def test_the_runner_exports_what_it_runs_and_no_more() -> None:
    """Pinned like httpx's test_exported_members: a new public name is a decision."""
    assert sorted(runner.__all__) == sorted(RUNNER_NAMES)
    assert len(runner.__all__) <= 22
    for name in runner.__all__:
        assert getattr(runner, name) is not None


def test_every_results_name_is_importable_and_documented() -> None:
    assert len(set(results.__all__)) == len(results.__all__)
    for name in results.__all__:
        value = getattr(results, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert value.__doc__, name


@pytest.mark.parametrize(
    ("name", "new_name"),
    [
        ("read_results", "read_results"),
        ("compare_results", "compare_results"),
        ("write_html_report", "write_html_report"),
        ("ResultsFileError", "ResultsFileError"),
        ("RewardStats", "RewardStats"),
        ("ResultGroup", "TrajectoryGroup"),
    ],
)
def test_a_moved_runner_name_still_works_with_a_deprecation_warning(
    name: str, new_name: str
) -> None:
    with pytest.warns(DeprecationWarning, match=rf"benchmax\.results\.{new_name}"):
        value = getattr(runner, name)
    assert value is getattr(results, new_name)
    assert name not in runner.__all__


def test_collected_group_is_a_deprecated_alias_of_trajectory_group() -> None:
    with pytest.warns(DeprecationWarning, match="TrajectoryGroup"):
        alias = training.CollectedGroup
    assert alias is TrajectoryGroup
    assert "CollectedGroup" not in training.__all__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'read_resultz'"):
        runner.read_resultz  # noqa: B018
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(runner)  # importing the package itself warns about nothing


def test_training_re_exports_the_advantages_from_results() -> None:
    assert training.scalar_reward is scalar_reward
    assert training.group_advantages is group_advantages
    assert training.read_trajectories is results.read_trajectories


# --- TrajectoryGroup -----------------------------------------------------------------------


def test_a_group_derives_everything_from_its_trajectories() -> None:
    group = TrajectoryGroup((rollout(0, 1.0), rollout(1, 0.0, "max_turns")))
    assert len(group) == 2
    assert (group.example_id, group.example_index) == ("ex-0", 0)
    assert group.termination_reasons == ("finished", "max_turns")
    assert group.rewards == ({"correct": 1.0, "format": 1.0}, {"correct": 0.0, "format": 1.0})
    assert group.usage == (
        {"prompt_tokens": 5, "completion_tokens": 0},
        {"prompt_tokens": 5, "completion_tokens": 1},
    )
    assert group.outcomes == {
        "run.e0.a1.r0": RolloutOutcome({"correct": 1.0, "format": 1.0}, "finished"),
        "run.e0.a1.r1": RolloutOutcome({"correct": 0.0, "format": 1.0}, "max_turns"),
    }
    assert group.values("correct") == [1.0, 0.0] and group.values("absent") == []


def test_scalars_use_the_groups_weights_unless_others_are_given() -> None:
    plain = TrajectoryGroup((rollout(0, 1.0), rollout(1, 0.0)))
    weighted = TrajectoryGroup(plain.trajectories, {"correct": 2.0})
    assert plain.scalars() == plain.scalar_rewards == (2.0, 1.0)
    assert weighted.scalar_rewards == (2.0, 0.0)
    assert weighted.scalars({"format": 1.0}) == (1.0, 1.0)


def test_advantages_leave_failures_out_of_the_baseline() -> None:
    group = TrajectoryGroup(
        (rollout(0, 1.0), rollout(1, 0.0), rollout(2, 0.0, "model_error")),
        {"correct": 1.0},
    )
    advantages = group.advantages()
    assert advantages[2] == 0.0
    assert advantages[:2] == group_advantages([1.0, 0.0])
    assert group.advantages("rloo")[:2] == group_advantages([1.0, 0.0], "rloo")
    failed = TrajectoryGroup((rollout(0, 0.0, "model_error"),))
    assert failed.advantages() == [0.0]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (((),), ValueError, "at least one trajectory"),
        (([],), TypeError, "must be a tuple of Trajectory, got list"),
        ((("x",),), TypeError, r"trajectories\[0\] must be a Trajectory, got str"),
        (((None,),), TypeError, r"trajectories\[0\] must be a Trajectory, got NoneType"),
        ("weights", TypeError, "reward weight 'correct' must be a finite number, got nan"),
        ("not a mapping", TypeError, "reward_weights must be a mapping"),
    ],
)
def test_a_group_refuses_what_is_not_one(arguments: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        if arguments == "weights":
            TrajectoryGroup((rollout(0, 1.0),), {"correct": float("nan")})
        elif arguments == "not a mapping":
            TrajectoryGroup((rollout(0, 1.0),), [("correct", 1.0)])  # type: ignore[arg-type]
        else:
            TrajectoryGroup(*arguments)  # type: ignore[arg-type]


def test_a_group_is_frozen_and_pickles() -> None:
    group = TrajectoryGroup((rollout(0, 1.0),), {"correct": 1.0})
    with pytest.raises(AttributeError):
        group.trajectories = ()  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(group))
    assert again == group and again.scalar_rewards == (1.0,)


# --- writing and reading through the package -----------------------------------------------


def test_a_store_writes_groups_that_the_readers_give_back(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    definition = RunDefinition(
        {"env": {"class": "m:E"}, "group_size": 2},
        data_dir=tmp_path,
        reward_weights={"correct": 1.0},
        secrets=("sk-secret-value",),
    )
    assert "sk-secret" not in repr(definition)
    group = TrajectoryGroup(
        (
            rollout(0, 1.0, messages=({"role": "user", "content": "sk-secret-value"},)),
            rollout(1, 0.0),
        )
    )
    store = ResultsStore.open(path, definition)
    try:
        store.append(group)
    finally:
        store.close()
    assert b"sk-secret-value" not in path.read_bytes()
    back = read_results(path)
    assert back.header["reward_weights"] == {"correct": 1.0}
    (read,) = groups_of(back)
    assert read.reward_weights == {"correct": 1.0}
    assert read.rewards == group.rewards and read.termination_reasons == ("finished", "finished")
    summary = read_results_summary(path)
    assert all(r.messages is None for r in summary.rollouts)
    resumed = ResultsStore.open(path, definition)
    resumed.close()
    assert resumed.is_complete(0, "ex-0") and resumed.groups[0].usage == group.usage


def test_write_results_replaces_a_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "rescored.jsonl"
    path.write_text("old\n")
    group = TrajectoryGroup((rollout(0, 1.0), rollout(1, 1.0)))
    run_id = write_results(
        path,
        RunDefinition({"group_size": 2}),
        [group],
        run_id="r-1",
        rescored_from={"path": "a.jsonl"},
    )
    back = read_results(path)
    assert run_id == "r-1" and back.header["run_id"] == "r-1"
    assert back.header["rescored_from"] == {"path": "a.jsonl"}
    assert len(back.rollouts) == 2


@pytest.mark.parametrize("size", [0, -1, True, "2", None])
def test_a_definition_needs_a_positive_group_size(size: object) -> None:
    fields = {} if size is None else {"group_size": size}
    with pytest.raises(ValueError, match="positive integer group_size"):
        RunDefinition(fields)
