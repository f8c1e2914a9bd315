"""collect_group, run_environment(on_group=...), read_trajectories and per-rollout seeds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv, NumberEnv, number_config, write_answer_data

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseRollout, Example, RolloutOutcome, RolloutRequest
from benchmax.results import read_results
from benchmax.runner import RunConfig, RunError, rollout_seed, run_environment
from benchmax.testing import Fault, MockModelServer
from benchmax.training import collect_group, read_trajectories
from benchmax.trajectory import Trajectory, annotate


class WeightedEnv(AnswerEnv):
    """AnswerEnv with two reward keys, a declared scalar rule and an annotation."""

    reward_keys = ("correct", "short")
    reward_weights: Mapping[str, float] | None = {"correct": 1.0, "short": 0.5}

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = rollout.messages[-1]["content"] or ""
        annotate("reply_length", len(reply))
        return {"correct": float(reply == rollout.example_args["answer"]), "short": 1.0}


def requests_for(
    server: MockModelServer, answer: str, count: int, **sampling: Any
) -> list[RolloutRequest[Any]]:
    payload = {"prompt_messages": [{"role": "user", "content": "q0"}], "answer": answer}
    example = Example(id="ex-q0", payload=payload)
    return [
        RolloutRequest(
            rollout_id=f"g.r{k}",
            example=example,
            model="m",
            base_url=server.session_url(f"g.r{k}"),
            model_auth=StaticBearerAuth("sk-collect-secret"),
            sampling_args=sampling,
        )
        for k in range(count)
    ]


async def test_collect_group_returns_outcomes_and_trajectories(
    mock_server: MockModelServer,
) -> None:
    mock_server.inject(Fault.status(400, message="nope"), session="g.r2")
    env = WeightedEnv()
    collected = await collect_group(env, requests_for(mock_server, "q0", 3))
    await env.aclose()
    assert set(collected.outcomes) == {"g.r0", "g.r1", "g.r2"}
    assert all(isinstance(o, RolloutOutcome) for o in collected.outcomes.values())
    assert [t.rollout_id for t in collected.trajectories] == ["g.r0", "g.r1", "g.r2"]
    first, _, failed = collected.trajectories
    assert (first.example_id, first.group_index, first.run_id) == ("ex-q0", 0, None)
    assert (
        first.rewards
        == dict(collected.outcomes["g.r0"].rewards)
        == {
            "correct": 1.0,
            "short": 1.0,
        }
    )
    assert first.messages is not None and first.messages[-1]["content"] == "q0"
    (call,) = first.model_calls
    assert call.message_index == 1 and call.finish_reason == "stop"
    assert first.annotations == {"reply_length": 2}
    assert first.timings["group_seconds"] >= first.timings["model_seconds"]
    assert failed.termination_reason == "model_error" and not failed.trainable
    assert collected.scalar_rewards == (1.5, 1.5, 0.0)
    # The failed rollout neither gets an advantage nor moves the baseline.
    assert collected.advantages() == [0.0, 0.0, 0.0]
    assert collected.advantages("dr_grpo") == [0.0, 0.0, 0.0]


async def test_advantages_come_from_the_trainable_rollouts(mock_server: MockModelServer) -> None:
    env = WeightedEnv()
    requests = requests_for(mock_server, "q0", 2)
    wrong = requests_for(mock_server, "other", 4)[2:]
    collected = await collect_group(env, [*requests, *wrong])
    await env.aclose()
    assert collected.scalar_rewards == (1.5, 1.5, 0.5, 0.5)
    assert collected.advantages() == [1.0, 1.0, -1.0, -1.0]


async def test_a_group_native_environment_gives_outcome_only_trajectories() -> None:
    env = NumberEnv(1)
    example = Example(id="ex-0", payload={"value": 3})
    requests = [
        RolloutRequest(
            rollout_id=f"run.e0.r{k}",
            example=example,
            model="m",
            base_url="http://unused.invalid/v1",
            model_auth=StaticBearerAuth("k"),
        )
        for k in range(2)
    ]
    collected = await collect_group(env, requests)
    assert [t.messages for t in collected.trajectories] == [None, None]
    assert [t.rewards["hit"] for t in collected.trajectories] == [1.0, 0.0]
    assert collected.scalar_rewards == (4.0, 3.0)  # default: every key weighs 1.0


async def test_run_environment_without_a_file_hands_groups_to_on_group(
    mock_server: MockModelServer, tmp_path: Path
) -> None:
    write_answer_data(tmp_path, count=3)
    groups: list[tuple[Trajectory, ...]] = []
    config = RunConfig(
        model="m", base_url=mock_server.base_url, base_dir=tmp_path, group_size=2, output=None
    )
    env = AnswerEnv()
    report = await run_environment(env, config, on_group=groups.append)
    await env.aclose()
    assert report.groups == 3 and len(groups) == 3
    assert sorted(g[0].example_index for g in groups) == [0, 1, 2]  # type: ignore[type-var]
    for group in groups:
        assert [t.group_index for t in group] == [0, 1]
        assert all(t.model_calls and t.run_id == report.run_id for t in group)
    assert not list(tmp_path.glob("*.jsonl.*"))


async def test_an_on_group_failure_stops_the_run_as_a_run_error(tmp_path: Path) -> None:
    def explode(group: tuple[Trajectory, ...]) -> None:
        raise KeyError("trainer queue full")

    with pytest.raises(RunError, match="on_group raised KeyError: 'trainer queue full'"):
        config = number_config(tmp_path, max_concurrent_groups=1)
        await run_environment(NumberEnv(3), config, on_group=explode)
    assert len(read_results(tmp_path / "results.jsonl").rollouts) == 3  # the group was saved


async def test_an_on_group_failure_without_a_results_file_says_nothing_was_saved(
    tmp_path: Path,
) -> None:
    def explode(group: tuple[Trajectory, ...]) -> None:
        raise KeyError("trainer queue full")

    config = number_config(tmp_path, max_concurrent_groups=1, output=None)
    with pytest.raises(RunError, match=r"'ex-0' ran \(no results file\)\)$"):
        await run_environment(NumberEnv(3), config, on_group=explode)
    assert not list(tmp_path.glob("*.jsonl"))


async def test_on_group_is_not_called_again_after_it_raised(tmp_path: Path) -> None:
    calls: list[str] = []

    def explode_on_second(group: tuple[Trajectory, ...]) -> None:
        calls.append(group[0].example_id)
        if len(calls) == 2:
            raise KeyError("trainer queue full")

    config = number_config(tmp_path, max_concurrent_groups=4)
    with pytest.raises(RunError, match="on_group raised KeyError"):
        await run_environment(NumberEnv(4), config, on_group=explode_on_second)
    assert len(calls) == 2  # the groups still settling were not handed over


async def test_read_trajectories_gives_back_what_on_group_saw(
    mock_server: MockModelServer, tmp_path: Path
) -> None:
    write_answer_data(tmp_path, count=2)
    seen: list[Trajectory] = []
    config = RunConfig(
        model="m",
        base_url=mock_server.base_url,
        base_dir=tmp_path,
        group_size=2,
        output=tmp_path / "run.jsonl",
    )
    env = WeightedEnv()
    await run_environment(env, config, on_group=seen.extend)
    await env.aclose()
    read = list(read_trajectories(tmp_path / "run.jsonl"))
    assert sorted(read, key=lambda t: t.rollout_id) == sorted(seen, key=lambda t: t.rollout_id)
    assert all(t.annotations["reply_length"] == 2 for t in read)


# --- seeds -----------------------------------------------------------------------------------


def test_rollout_seeds_are_distinct_stable_and_in_range() -> None:
    seeds = [rollout_seed(7, "ex-0", k) for k in range(64)]
    assert len(set(seeds)) == 64 and all(0 <= s < 2**31 for s in seeds)
    assert seeds == [rollout_seed(7, "ex-0", k) for k in range(64)]
    assert rollout_seed(8, "ex-0", 0) != seeds[0] != rollout_seed(7, "ex-1", 0)


def test_a_run_seed_and_a_fixed_seed_cannot_both_be_set() -> None:
    with pytest.raises(ValueError, match="not both"):
        RunConfig(model="m", base_url="http://x.invalid/v1", seed=1, sampling_args={"seed": 2})
    with pytest.raises(ValueError, match="seed must be an integer"):
        RunConfig(model="m", base_url="http://x.invalid/v1", seed=True)


def sent_seeds(server: MockModelServer) -> dict[str, int]:
    """The seed each rollout sent, by the prompt it answered and the rollout index."""
    seeds: dict[str, int] = {}
    for request in server.requests:
        index = request.session.rpartition(".r")[2]
        question = request.body["messages"][0]["content"]
        seeds[f"{question}/{index}"] = request.body["seed"]
    return seeds


async def test_each_rollout_sends_its_own_seed_and_a_resume_sends_the_same(
    make_mock_server: Any, tmp_path: Path
) -> None:
    write_answer_data(tmp_path, count=3)
    server = await make_mock_server()
    options: dict[str, Any] = {
        "model": "m",
        "base_url": server.base_url + "/{rollout_id}",
        "base_dir": tmp_path,
        "group_size": 3,
        "seed": 11,
    }
    output = tmp_path / "seeded.jsonl"
    env = AnswerEnv()
    await run_environment(env, RunConfig(**options, output=output))
    full = sent_seeds(server)
    assert len(full) == 9 and len(set(full.values())) == 9
    header = json.loads(output.read_text().splitlines()[0])
    assert header["definition"]["seed"] == 11
    # Drop the last group and resume: the group runs again under a new run attempt.
    lines = output.read_text().splitlines(keepends=True)
    output.write_text("".join(lines[:-3]))
    server.clear_requests()
    await run_environment(env, RunConfig(**options, output=output))
    await env.aclose()
    again = sent_seeds(server)
    assert len(again) == 3 and all(full[key] == seed for key, seed in again.items())


async def test_a_fixed_seed_in_sampling_args_goes_to_every_request(
    mock_server: MockModelServer, tmp_path: Path
) -> None:
    write_answer_data(tmp_path, count=2)
    config = RunConfig(
        model="m",
        base_url=mock_server.base_url,
        base_dir=tmp_path,
        group_size=2,
        sampling_args={"seed": 5},
    )
    env = AnswerEnv()
    await run_environment(env, config)
    await env.aclose()
    assert [r.body["seed"] for r in mock_server.requests] == [5, 5, 5, 5]
