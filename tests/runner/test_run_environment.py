"""run_environment: datasets, groups, concurrency, rollout ids, results lines, report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from tests.runner import sample_envs
from tests.runner.sample_envs import (
    AnswerEnv,
    NoCapEnv,
    NumberEnv,
    number_config,
    write_answer_data,
)

from benchmax.auth import InjectedAuth, ModelRequestContext, StaticBearerAuth, bind_model_auth
from benchmax.runner import (
    GroupContractError,
    Progress,
    RunConfig,
    RunError,
    run_environment,
)
from benchmax.testing import MockModelServer, RecordedRequest

HARBOR_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def source_digest(path: str) -> str:
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_runs_every_example_as_one_group(tmp_path: Path) -> None:
    env = NumberEnv(5)
    report = await run_environment(env, number_config(tmp_path))
    records = lines(tmp_path / "results.jsonl")
    header, rollouts = records[0], records[1:]
    assert header["type"] == "header"
    assert header["definition"] == {
        "env": {"class": f"{NumberEnv.__module__}:NumberEnv"},
        "env_source": {NumberEnv.__module__: source_digest(sample_envs.__file__)},
        "split": "eval",
        "model": "m",
        "base_url": "http://unused.invalid/v1",
        "group_size": 3,
        "max_examples": None,
    }
    assert len(rollouts) == 15
    assert [(r["example_index"], r["group_index"]) for r in rollouts] == [
        (i, k) for i in range(5) for k in range(3)
    ]
    for record in rollouts:
        assert record["run_id"] == header["run_id"]
        assert record["split"] == "eval"
        assert record["example_id"] == f"ex-{record['example_index']}"
        assert record["attempt"] == 1
        assert record["termination_reason"] == "finished"
        value, k = record["example_index"], record["group_index"]
        assert record["rewards"] == {"hit": float((value + k) % 3 == 0), "value": float(value)}
        assert record["transcript"] is None  # not a BaseEnv
        assert record["timings"]["group_seconds"] >= 0
    assert report.groups == 5 and report.rollouts == 15 and report.examples == 5


async def test_the_header_records_the_absolute_data_directory_outside_the_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_answer_data(data, count=1)
    monkeypatch.chdir(tmp_path)
    config = RunConfig(
        model="m", base_url="http://127.0.0.1:9/v1", base_dir=Path("data"), group_size=1,
        output=tmp_path / "r.jsonl",
    )  # fmt: skip
    await run_environment(AnswerEnv(), config)
    header = lines(tmp_path / "r.jsonl")[0]
    assert header["data_dir"] == str(data)
    assert "data_dir" not in header["definition"]
    moved = tmp_path / "moved"
    data.rename(moved)
    resumed = await run_environment(AnswerEnv(), dataclasses.replace(config, base_dir=moved))
    assert resumed.groups_resumed == 1  # the same run, its data elsewhere
    assert lines(tmp_path / "r.jsonl")[0]["data_dir"] == str(data)


async def test_rollout_ids_are_harbor_safe_and_unique(tmp_path: Path) -> None:
    await run_environment(NumberEnv(4), number_config(tmp_path))
    ids = [r["rollout_id"] for r in lines(tmp_path / "results.jsonl")[1:]]
    assert len(set(ids)) == len(ids) == 12
    assert all(HARBOR_SAFE.match(rollout_id) for rollout_id in ids)
    run_id = lines(tmp_path / "results.jsonl")[0]["run_id"]
    assert HARBOR_SAFE.match(run_id)


async def test_max_examples_is_passed_to_an_override_that_accepts_it(tmp_path: Path) -> None:
    env = NumberEnv(10)
    report = await run_environment(env, number_config(tmp_path, max_examples=3))
    assert env.dataset_calls == [{"split": "eval", "max_examples": 3}]
    assert report.groups == 3


async def test_max_examples_takes_the_first_n_when_the_override_lacks_it(tmp_path: Path) -> None:
    env = NoCapEnv(10)
    report = await run_environment(env, number_config(tmp_path, max_examples=4))
    assert env.dataset_calls == [{"split": "eval"}]
    assert report.groups == 4
    indices = sorted({r["example_index"] for r in lines(tmp_path / "results.jsonl")[1:]})
    assert indices == [0, 1, 2, 3]


async def test_group_concurrency_is_bounded(tmp_path: Path) -> None:
    env = NumberEnv(12, delay=0.02)
    await run_environment(env, number_config(tmp_path, max_concurrent_groups=3))
    assert env.peak_groups == 3


async def test_split_reaches_the_dataset_and_requests(tmp_path: Path) -> None:
    env = NumberEnv(2)
    await run_environment(env, number_config(tmp_path, split="train"))
    assert env.dataset_calls[0]["split"] == "train"
    assert {r["split"] for r in lines(tmp_path / "results.jsonl")[1:]} == {"train"}


async def test_operational_failures_are_recorded_not_raised(tmp_path: Path) -> None:
    env = NumberEnv()
    env.payloads = [{"value": 0}, {"value": 1, "fail": "sandbox_error"}]
    report = await run_environment(env, number_config(tmp_path))
    failed = [r for r in lines(tmp_path / "results.jsonl")[1:] if r["example_index"] == 1]
    assert [r["termination_reason"] for r in failed] == ["finished", "sandbox_error", "finished"]
    assert failed[1]["rewards"] == {"hit": 0.0, "value": 0.0}
    messages = [log["message"] for log in failed[1]["logs"]]
    assert any("termination_reason=sandbox_error" in m for m in messages)
    assert failed[0]["logs"] == []
    assert report.rollouts_by_reason == {"finished": 5, "sandbox_error": 1}
    assert report.groups_by_reason == {"finished": 2, "sandbox_error": 1}


async def test_contract_error_stops_the_run_after_saving_finished_groups(tmp_path: Path) -> None:
    env = NumberEnv()
    env.payloads = [{"value": 0}, {"value": 1}, {"broken": True}, {"value": 3}, {"value": 4}]
    with pytest.raises(GroupContractError, match=r"example 2 .*KeyError") as caught:
        await run_environment(env, number_config(tmp_path, max_concurrent_groups=1))
    assert isinstance(caught.value.__cause__, KeyError)
    saved = {r["example_index"] for r in lines(tmp_path / "results.jsonl")[1:]}
    assert saved == {0, 1}
    assert env.started == [0, 1, -1]  # nothing scheduled after the error


async def test_after_a_contract_error_only_the_groups_in_flight_finish(tmp_path: Path) -> None:
    env = NumberEnv(delay=0.05)
    env.payloads = [{"broken": True}, *({"value": n} for n in range(1, 8))]
    with pytest.raises(GroupContractError, match="example 0"):
        await run_environment(env, number_config(tmp_path, max_concurrent_groups=2))
    assert env.started == [-1, 1]  # the second worker finished example 1, then stopped
    saved = {r["example_index"] for r in lines(tmp_path / "results.jsonl")[1:]}
    assert saved == {1}


async def test_report_statistics(tmp_path: Path) -> None:
    env = NumberEnv(3)
    report = await run_environment(env, number_config(tmp_path))
    # hits: value 0 -> k=0 ; value 1 -> k=2 ; value 2 -> k=1: one hit of three per group
    hit = report.reward_stats["hit"]
    assert hit.mean == pytest.approx(1 / 3)
    assert hit.std == pytest.approx((2 / 9) ** 0.5)
    assert (hit.min, hit.max) == (0.0, 1.0)
    value = report.reward_stats["value"]
    assert (value.mean, value.min, value.max) == (1.0, 0.0, 2.0)
    assert report.no_variance_group_share == 0.0
    assert report.rollouts_run == 9
    assert report.rollouts_per_second > 0 and report.wall_seconds > 0
    written = json.loads((tmp_path / "results.report.json").read_text())
    assert written["reward_stats"]["value"]["max"] == 2.0
    assert written["rollouts_by_reason"] == {"finished": 9}
    assert report.report_path == tmp_path / "results.report.json"


async def test_no_variance_share_counts_groups_with_identical_rewards(tmp_path: Path) -> None:
    report = await run_environment(NumberEnv(4), number_config(tmp_path, group_size=1))
    assert report.no_variance_group_share == 1.0


async def test_progress_is_reported_per_group(tmp_path: Path) -> None:
    updates: list[Progress] = []
    await run_environment(NumberEnv(4), number_config(tmp_path), on_progress=updates.append)
    assert [u.examples_done for u in updates] == [0, 1, 2, 3, 4]
    assert {u.examples_total for u in updates} == {4}
    assert updates[-1].rollouts_run == 12
    assert updates[-1].first_reward_key == "hit"
    assert updates[-1].first_reward_mean == pytest.approx(4 / 12)


async def test_without_output_nothing_is_written(tmp_path: Path) -> None:
    report = await run_environment(NumberEnv(2), number_config(tmp_path, output=None))
    assert report.results_path is None and report.report_path is None
    assert list(tmp_path.iterdir()) == []
    assert report.groups == 2


async def test_base_env_transcripts_timings_and_per_rollout_sessions(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=4)

    def policy(body: dict, request: RecordedRequest) -> str:
        # rollout r0 echoes the question (correct for even rows), others answer "other"
        question = body["messages"][-1]["content"]
        return question if request.session.endswith(".r0") else "other"

    async with MockModelServer(policy) as server:
        config = RunConfig(
            model="mock",
            base_url=f"{server.origin}/sessions/{{rollout_id}}/v1",
            model_auth=StaticBearerAuth("sk-model-secret"),
            base_dir=tmp_path,
            group_size=2,
            output=tmp_path / "out" / "results.jsonl",
        )
        report = await run_environment(AnswerEnv(), config)
        sessions = {request.session for request in server.requests}
    records = lines(tmp_path / "out" / "results.jsonl")[1:]
    assert sessions == {record["rollout_id"] for record in records}
    by_position = {(r["example_index"], r["group_index"]): r for r in records}
    assert by_position[(0, 0)]["rewards"] == {"correct": 1.0}
    assert by_position[(0, 1)]["rewards"] == {"correct": 0.0}
    assert by_position[(1, 1)]["rewards"] == {"correct": 1.0}
    assert by_position[(0, 0)]["transcript"] == [
        {"role": "user", "content": "q0"},
        {"role": "assistant", "content": "q0"},
    ]
    timings = by_position[(0, 0)]["timings"]
    assert set(timings) == {"group_seconds", "model_seconds", "tool_seconds", "reward_seconds"}
    assert timings["model_seconds"] > 0
    assert report.reward_stats["correct"].mean == 0.5
    assert "sk-model-secret" not in (tmp_path / "out" / "results.jsonl").read_text()


async def test_a_session_url_template_gives_every_rollout_its_own_session(
    tmp_path: Path,
) -> None:
    write_answer_data(tmp_path, count=1)
    async with MockModelServer() as server:
        config = RunConfig(
            model="mock",
            base_url=server.session_url("{rollout_id}"),
            base_dir=tmp_path,
            group_size=2,
            output=tmp_path / "results.jsonl",
        )
        await run_environment(AnswerEnv(), config)
        sessions = [request.session for request in server.requests]
    rollout_ids = [record["rollout_id"] for record in lines(tmp_path / "results.jsonl")[1:]]
    assert len(rollout_ids) == 2
    assert sorted(sessions) == sorted(rollout_ids)


async def test_auth_providers_are_bound_and_outer_bindings_kept(tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    class AuthEnv(NumberEnv):
        async def run_rollout(self, request):  # type: ignore[no-untyped-def]
            context = ModelRequestContext(base_url="u", model="m", rollout_id=request.rollout_id)
            for name in ("judge", "outer"):
                headers = await InjectedAuth(name).headers_for_request(context)
                seen[name] = headers["Authorization"]
            return await super().run_rollout(request)

    config = number_config(tmp_path, auth_providers={"judge": StaticBearerAuth("judge-key")})
    with bind_model_auth({"outer": StaticBearerAuth("outer-key")}):
        await run_environment(AuthEnv(1), config)
    assert seen == {"judge": "Bearer judge-key", "outer": "Bearer outer-key"}


async def test_logs_are_attributed_and_secrets_masked(tmp_path: Path) -> None:
    class ChattyEnv(NumberEnv):
        async def run_rollout(self, request):  # type: ignore[no-untyped-def]
            logging.getLogger("user.env").warning(
                "rollout %s used key judge-secret", request.rollout_id
            )
            return await super().run_rollout(request)

        async def compute_group_rewards(self, rollouts):  # type: ignore[no-untyped-def]
            logging.getLogger("user.env").warning("group hook ran")
            return None

    config = number_config(tmp_path, auth_providers={"judge": StaticBearerAuth("judge-secret")})
    root = logging.getLogger()
    handlers_before = list(root.handlers)
    await run_environment(ChattyEnv(2), config)
    assert root.handlers == handlers_before  # attached for the run only
    text = (tmp_path / "results.jsonl").read_text()
    assert "judge-secret" not in text
    for record in lines(tmp_path / "results.jsonl")[1:]:
        messages = [log["message"] for log in record["logs"]]
        assert messages == [f"rollout {record['rollout_id']} used key ***", "group hook ran"]
        assert record["logs"][0]["level"] == "WARNING"
        assert record["logs"][0]["logger"] == "user.env"


async def test_a_dataset_that_cannot_load_is_a_run_error(tmp_path: Path) -> None:
    (tmp_path / "eval.jsonl").write_text('{"no_question": 1}\n')
    config = number_config(tmp_path, base_dir=tmp_path)
    with pytest.raises(RunError) as caught:
        await run_environment(AnswerEnv(), config)
    assert str(caught.value) == (
        f"cannot load the eval split from {tmp_path}: KeyError: 'question' "
        f"(while loading {tmp_path / 'eval.jsonl'}:1)"
    )
    with pytest.raises(FileNotFoundError):
        await run_environment(AnswerEnv(), number_config(tmp_path, base_dir=tmp_path / "nope"))
    assert not (tmp_path / "results.jsonl").exists()  # nothing started


async def test_an_empty_split_is_a_run_error_and_writes_nothing(tmp_path: Path) -> None:
    # An empty eval.jsonl (or a create_dataset that yields nothing) used to "run" 0 groups,
    # end 0 and write a header-only results file and an all-empty report.
    (tmp_path / "eval.jsonl").write_text("")
    config = number_config(tmp_path, base_dir=tmp_path)
    with pytest.raises(RunError) as caught:
        await run_environment(AnswerEnv(), config)
    assert str(caught.value) == (
        f"the eval split from {tmp_path} has no examples: "
        "AnswerEnv.create_dataset returned an empty dataset"
    )
    with pytest.raises(RunError) as caught:
        await run_environment(NumberEnv(0), number_config(tmp_path))
    assert str(caught.value).endswith("NumberEnv.create_dataset returned an empty dataset")
    assert not (tmp_path / "results.jsonl").exists()
    assert not (tmp_path / "results.report.json").exists()


async def test_a_hook_blocking_the_event_loop_is_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import time

    class SleepyEnv(NumberEnv):
        async def run_rollout(self, request: Any) -> Any:
            if request.example.id == "ex-0":
                # Blocks the loop (the mistake being warned about) until the warning came,
                # however late a busy machine makes the watcher.
                end = time.monotonic() + 120
                while "event loop" not in caplog.text and time.monotonic() < end:
                    time.sleep(0.05)
            return await super().run_rollout(request)

    with caplog.at_level(logging.WARNING, logger="benchmax.runner"):
        await run_environment(SleepyEnv(2), number_config(tmp_path, group_size=1))
    warnings = [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "SleepyEnv.run_rollout" in warnings[0] and "asyncio.to_thread" in warnings[0]
