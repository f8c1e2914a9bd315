"""The results file survives what a run meets: odd text, full disks, secrets, broken hooks.

Every test reads the file back (``read_results`` and the raw bytes).
"""

from __future__ import annotations

import json
import logging
import resource
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv, NumberEnv, number_config, write_answer_data

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseRollout, Environment
from benchmax.envs.base._sent_messages import messages_as_sent
from benchmax.results import ResultsFileError, ResultsWriteError, RunDefinition, read_results
from benchmax.results._line_encoding import encoded_line
from benchmax.results._store import ResultsStore
from benchmax.runner import GroupContractError, RunConfig, RunError, run_environment
from benchmax.testing import MockModelServer, RecordedRequest, scripted
from benchmax.trajectory import Trajectory


def raw_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def outcome_table(path: Path) -> dict[tuple[int, int], tuple[str, dict[str, float]]]:
    return {
        (r.example_index, r.group_index): (r.termination_reason, r.rewards)
        for r in read_results(path).rollouts
    }


class ToolEnv(AnswerEnv):
    """AnswerEnv with an ``echo`` tool; its reward hook logs the final reply."""

    max_turns = 3

    async def list_tools(self) -> list[Any]:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return [{"type": "function", "function": {"name": "echo", "parameters": schema}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **arguments: Any) -> str:
        return f"tool saw {arguments.get('text', '')}"

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = rollout.messages[-1]["content"] or ""
        logging.getLogger("user.reward").warning("final reply %s", reply)
        return {"correct": float(reply == "done \ud800")}


def base_config(server: MockModelServer, tmp_path: Path, **changes: Any) -> RunConfig:
    options: dict[str, Any] = {
        "model": "mock",
        "base_url": server.base_url,
        "model_auth": StaticBearerAuth("sk-test-1234567"),
        "base_dir": tmp_path,
        "group_size": 2,
        "output": tmp_path / "results.jsonl",
    }
    options.update(changes)
    return RunConfig(**options)


# --- text that UTF-8 cannot encode ----------------------------------------------------------


async def test_lone_surrogates_from_model_and_tools_are_written_and_read_back(
    tmp_path: Path,
) -> None:
    write_answer_data(tmp_path, count=2)

    def policy(body: dict[str, Any], request: RecordedRequest) -> Any:
        if request.session.endswith(".r0"):
            return "done \ud800"
        return {"tool_calls": [{"name": "echo", "arguments": {"text": "half \udfff"}}]}

    class OneTurn(ToolEnv):
        max_turns = 1  # the tool's reply is recorded, never sent back

    async with MockModelServer(policy) as server:
        config = base_config(
            server,
            tmp_path,
            base_url=f"{server.origin}/sessions/{{rollout_id}}/v1",
            max_concurrent_groups=1,
        )
        report = await run_environment(OneTurn(), config)
        assert report.groups == 2
        assert report.rollouts_by_reason == {"finished": 2, "max_turns_exceeded": 2}
        again = await run_environment(OneTurn(), config)  # resume: nothing left, no error
    assert again.rollouts_run == 0 and again.groups_resumed == 2
    path = tmp_path / "results.jsonl"
    path.read_bytes().decode("utf-8")  # the file is valid UTF-8
    assert b"\\ud800" in path.read_bytes() and b"\\udfff" in path.read_bytes()
    rollouts = read_results(path).rollouts
    assert [r.group_index for r in rollouts] == [0, 1, 0, 1]
    for answered, called in zip(rollouts[::2], rollouts[1::2], strict=True):
        assert answered.messages is not None and called.messages is not None
        assert answered.messages[-1] == {"role": "assistant", "content": "done \ud800"}
        assert [log["message"] for log in answered.logs] == ["final reply done \ud800"]
        assert answered.rewards == {"correct": 1.0}
        call = called.messages[1]["tool_calls"][0]
        assert json.loads(call["function"]["arguments"]) == {"text": "half \udfff"}
        assert called.messages[2]["role"] == "tool"
        assert called.messages[2]["content"] == "tool saw half \udfff"


def test_a_line_never_fails_on_the_values_a_record_holds() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)

    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    record = {
        "text": "a\ud800b\udfffc é",
        "tuple_keys": {(1, 2): "x", 3: "y"},
        "cycle": cycle,
        "object": Opaque(),
        "broken": Unprintable(),
    }
    line = encoded_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = json.loads(line.decode("utf-8"))
    assert back["text"] == "a\ud800b\udfffc é"
    assert back["tuple_keys"] == {"(1, 2)": "x", "3": "y"}
    assert back["cycle"] == ["<cycle>"]
    assert back["object"] == "opaque"
    assert back["broken"] == "<unprintable Unprintable>"
    plain = encoded_line({"text": "é \\ud800 \\\ud800"})  # backslashes next to a surrogate
    assert json.loads(plain) == {"text": "é \\ud800 \\\ud800"}
    assert "é".encode() in plain  # readable text stays unescaped


# --- a write that fails midway (file size limit: the kernel writes part of the group) ------


@pytest.fixture
def file_size_limit() -> Iterator[Any]:
    """Set the process's file size limit (bytes) inside the test; restored afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


async def test_a_failed_group_write_is_cut_back_and_the_run_resumes(
    tmp_path: Path, file_size_limit: Any
) -> None:
    full = tmp_path / "full.jsonl"
    await run_environment(NumberEnv(6), number_config(tmp_path, output=full))
    lines = full.read_bytes().splitlines(keepends=True)
    three_groups = sum(len(line) for line in lines[:10])
    path = tmp_path / "results.jsonl"
    config = number_config(tmp_path, max_concurrent_groups=1)

    env = NumberEnv(6)
    file_size_limit(three_groups + 40)  # the 4th group is torn by the kernel, 40 bytes in
    try:
        with pytest.raises(ResultsWriteError) as caught:
            await run_environment(env, config)
    finally:
        file_size_limit(resource.RLIM_INFINITY)
    message = str(caught.value)
    assert "\n" not in message
    assert f"cannot write the results file {path}: File too large" in message
    assert "run the same command again to resume" in message
    assert not isinstance(caught.value, GroupContractError)
    assert "contract" not in message
    assert env.started == [0, 1, 2, 3]  # the run stopped at the failed group
    saved = raw_lines(path)  # ends with a newline, every line whole: the torn part is gone
    assert len(saved) == 10 and path.stat().st_size < three_groups + 40
    assert {r["example_index"] for r in raw_lines(path)[1:]} == {0, 1, 2}
    assert {r.example_index for r in read_results(path).rollouts} == {0, 1, 2}

    env = NumberEnv(6)
    report = await run_environment(env, config)  # space is back
    assert sorted(env.started) == [3, 4, 5]
    assert report.groups_resumed == 3 and report.groups == 6
    assert outcome_table(path) == outcome_table(full)
    assert len(raw_lines(path)) == 1 + 18  # no torn line, no duplicate


async def test_a_header_that_cannot_be_written_leaves_no_file_content(
    tmp_path: Path, file_size_limit: Any
) -> None:
    path = tmp_path / "results.jsonl"
    file_size_limit(10)
    try:
        with pytest.raises(ResultsWriteError, match=r"cannot write the results file .*results"):
            await run_environment(NumberEnv(2), number_config(tmp_path))
    finally:
        file_size_limit(resource.RLIM_INFINITY)
    assert path.read_bytes() == b""
    report = await run_environment(NumberEnv(2), number_config(tmp_path))
    assert report.groups == 2 and len(read_results(path).rollouts) == 6


def test_after_a_failed_write_the_store_refuses_more_groups(
    tmp_path: Path, file_size_limit: Any
) -> None:
    from benchmax.results import RunDefinition, TrajectoryGroup

    path = tmp_path / "results.jsonl"
    store = ResultsStore.open(path, RunDefinition({"group_size": 1}))
    size = path.stat().st_size
    record = Trajectory(
        rollout_id="r0", example_id="ex-0", termination_reason="finished", rewards={"r": 1.0}
    )
    file_size_limit(size + 5)
    try:
        with pytest.raises(ResultsWriteError):
            store.append(TrajectoryGroup((replace(record, annotations={"pad": "x" * 100}),)))
    finally:
        file_size_limit(resource.RLIM_INFINITY)
    assert path.stat().st_size == size
    with pytest.raises(ResultsWriteError):  # space is back, but this run has stopped
        store.append(TrajectoryGroup((record,)))
    store.close()
    assert path.stat().st_size == size and 0 not in store.groups


async def test_an_unwritable_location_is_a_one_line_write_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = number_config(tmp_path, output=blocker / "results.jsonl")
    with pytest.raises(ResultsWriteError, match=r"cannot open the results file .*file/results"):
        await run_environment(NumberEnv(1), config)


# --- secrets -------------------------------------------------------------------------------


async def test_known_secrets_are_masked_in_stored_transcripts(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=1)
    secret = "sk-test-1234567"
    policy = scripted([f"your key is {secret}", {"content": f"again {secret}!"}])
    async with MockModelServer(policy) as server:
        config = base_config(server, tmp_path, auth_providers={"judge": StaticBearerAuth("jk-9")})
        await run_environment(AnswerEnv(), config)
    path = tmp_path / "results.jsonl"
    assert secret.encode() not in path.read_bytes()
    transcripts = [r.messages for r in read_results(path).rollouts]
    assert sorted(t[-1]["content"] for t in transcripts if t) == [
        "again ***!",
        "your key is ***",
    ]


# --- contract errors -----------------------------------------------------------------------


class BrokenToolsEnv(AnswerEnv):
    async def list_tools(self) -> list[Any]:
        return self._tools()

    def _tools(self) -> list[Any]:
        raise LookupError("tool registry\nis empty")


async def test_a_contract_error_names_the_hook_and_logs_its_traceback(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=2)
    async with MockModelServer(scripted(["x"] * 8)) as server:  # never called
        with pytest.raises(GroupContractError) as caught:
            await run_environment(BrokenToolsEnv(), base_config(server, tmp_path))
    error = caught.value
    log = tmp_path / "results.error.log"
    assert error.hook == "BrokenToolsEnv.list_tools"
    assert error.log_path == log
    assert "broke the environment contract in BrokenToolsEnv.list_tools: LookupError" in str(error)
    assert str(error).endswith(f"(traceback in {log})")
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text
    assert "in _tools" in text and "LookupError: tool registry\nis empty" in text
    assert text.count("=== ") >= 1


async def test_a_hook_named_in_a_note_wins_and_secrets_stay_out_of_the_log(
    tmp_path: Path,
) -> None:
    class NotedEnv(NumberEnv):
        async def run_rollout(self, request):  # type: ignore[no-untyped-def]
            error = ValueError("bad key judge-secret")
            error.add_note("benchmax: raised by NotedEnv.compute_reward")
            raise error

    config = number_config(tmp_path, auth_providers={"judge": StaticBearerAuth("judge-secret")})
    with pytest.raises(GroupContractError, match=r"in NotedEnv.compute_reward: ValueError"):
        await run_environment(NotedEnv(1), config)
    text = (tmp_path / "results.error.log").read_text()
    assert "ValueError: bad key ***" in text and "judge-secret" not in text


async def test_an_error_of_the_library_itself_names_no_hook(tmp_path: Path) -> None:
    class WrongIdEnv(NumberEnv):
        run_group = Environment.run_group  # no user frame between the runner and the check

        async def run_rollout(self, request):  # type: ignore[no-untyped-def]
            attempt = await super().run_rollout(request)
            return type(attempt)(
                rollout_id="other", termination_reason="finished", rewards=attempt.rewards
            )

    with pytest.raises(GroupContractError) as caught:
        await run_environment(WrongIdEnv(1), number_config(tmp_path, output=None))
    assert caught.value.hook is None and caught.value.log_path is None
    assert "contract: ValueError: run_rollout returned the wrong rollout ID" in str(caught.value)
    assert "traceback in" not in str(caught.value)


async def test_the_hook_is_the_user_method_the_library_called(tmp_path: Path) -> None:
    class HelperEnv(NumberEnv):
        async def run_group(self, requests):  # type: ignore[no-untyped-def]
            return await super().run_group(requests)

        async def run_rollout(self, request):  # type: ignore[no-untyped-def]
            return self.helper()

        def helper(self) -> Any:
            return json.loads("{not json")

    with pytest.raises(GroupContractError, match=r"in HelperEnv.run_rollout: JSONDecodeError"):
        await run_environment(HelperEnv(1), number_config(tmp_path))


# --- resume, completeness and the format ---------------------------------------------------


async def test_forced_resumes_keep_every_record_and_the_definition_history(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=2))
    first = read_results(path).rollouts
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=3, force=True))
    env = NumberEnv(6)
    report = await run_environment(env, number_config(tmp_path, max_examples=5, force=True))
    assert sorted(env.started) == [3, 4] and report.groups_resumed == 3 and report.groups == 5
    results = read_results(path)
    assert results.rollouts[:6] == first  # the first run's records, unchanged
    assert [r.example_index for r in results.rollouts] == [i for i in range(5) for _ in "abc"]
    assert results.header["definition"]["max_examples"] == 5
    history = results.header["previous_definitions"]
    assert [d["max_examples"] for d in history] == [2, 3]
    assert results.header["run_id"] == first[0].run_id
    assert not (tmp_path / "results.jsonl.tmp").exists()


async def test_a_forced_header_rewrite_never_follows_a_link_planted_beside_the_file(
    tmp_path: Path,
) -> None:
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    elsewhere.mkdir()
    unrelated = elsewhere / "unrelated.txt"
    unrelated.write_text("keep me\n")
    await run_environment(NumberEnv(6), number_config(run_dir, max_examples=2))
    for name in ("results.jsonl.tmp", ".results.jsonl.tmp"):
        (run_dir / name).symlink_to(unrelated)
    await run_environment(NumberEnv(6), number_config(run_dir, max_examples=3, force=True))
    assert unrelated.read_text() == "keep me\n"
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [".results.jsonl.tmp", "results.jsonl", "results.jsonl.tmp", "results.report.json"]
    )
    assert len(read_results(run_dir / "results.jsonl").rollouts) == 9


async def test_a_symlinked_results_path_is_written_through_to_its_target(
    tmp_path: Path,
) -> None:
    target_dir = tmp_path / "disk"
    target_dir.mkdir()
    target = target_dir / "real.jsonl"
    link = tmp_path / "results.jsonl"
    link.symlink_to(target)
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=2))
    await run_environment(NumberEnv(6), number_config(tmp_path, max_examples=3, force=True))
    assert link.is_symlink() and link.resolve() == target.resolve()
    results = read_results(target)
    assert len(results.rollouts) == 9 and results.header["definition"]["max_examples"] == 3
    assert [p.name for p in target_dir.iterdir()] == ["real.jsonl"]


async def test_group_size_one(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    config = number_config(tmp_path, group_size=1)
    await run_environment(NumberEnv(3), config)
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    assert [r.group_index for r in read_results(path).rollouts] == [0, 0, 0]
    path.write_bytes(b"".join(lines[:3]))  # the last group is lost
    env = NumberEnv(3)
    report = await run_environment(env, config)
    assert env.started == [2] and report.groups_resumed == 2 and report.rollouts_run == 1
    assert [r.example_index for r in read_results(path).rollouts] == [0, 1, 2]


async def test_a_blank_line_mid_file_hides_nothing(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    await run_environment(NumberEnv(3), number_config(tmp_path))
    lines = path.read_bytes().splitlines(keepends=True)
    # blank lines between groups and inside one (with spaces, and CRLF)
    path.write_bytes(b"".join([*lines[:2], b"\n", *lines[2:4], b"  \r\n", b"\n", *lines[4:]]))
    assert len(read_results(path).rollouts) == 9
    env = NumberEnv(3)
    report = await run_environment(env, number_config(tmp_path))
    assert env.started == [] and report.groups_resumed == 3


@pytest.mark.parametrize(("kept", "complete"), [(2, False), (3, True)])
async def test_a_group_is_complete_with_exactly_group_size_lines(
    tmp_path: Path, kept: int, complete: bool
) -> None:
    path = tmp_path / "results.jsonl"
    await run_environment(NumberEnv(2), number_config(tmp_path))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[: 1 + kept], *lines[4:]]))
    assert {r.example_index for r in read_results(path).rollouts} == ({0, 1} if complete else {1})
    env = NumberEnv(2)
    await run_environment(env, number_config(tmp_path))
    assert env.started == ([] if complete else [0])


async def test_group_positions_must_cover_the_group(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    await run_environment(NumberEnv(1), number_config(tmp_path))
    header, *rollouts = raw_lines(path)
    rollouts[2]["group_index"] = 3
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *rollouts]))
    assert read_results(path).rollouts == ()


async def test_another_format_version_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    await run_environment(NumberEnv(1), number_config(tmp_path))
    header, *rollouts = raw_lines(path)
    header["format"] = "benchmax.results/2"
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *rollouts]))
    before = path.read_bytes()
    pattern = (
        r"results.jsonl is in results format benchmax.results/2, which benchmax \S+ cannot "
        r"read \(it reads benchmax.results/1\)"
    )
    with pytest.raises(ResultsFileError, match=pattern):
        read_results(path)
    with pytest.raises(ResultsFileError, match=pattern):
        await run_environment(NumberEnv(1), number_config(tmp_path, force=True))
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("first_line", "reason"),
    [
        ('{"type": "header", "definition": {}}', "no results format"),
        ('{"type": "header", "format": "benchmax.results/1"}', "damaged results header"),
        ('{"type": "rollout", "format": "benchmax.results/1"}', "no results header"),
        ("[1, 2]", "no results header"),
    ],
)
def test_headers_that_are_not_results_headers(tmp_path: Path, first_line: str, reason: str) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(first_line + "\n")
    with pytest.raises(ResultsFileError, match=reason):
        read_results(path)


def test_a_missing_results_file_is_a_results_file_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError, match=r"cannot read .*nothing.jsonl"):
        read_results(tmp_path / "nothing.jsonl")
    assert issubclass(ResultsFileError, RunError)


async def test_transcripts_and_logs_round_trip(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=1)

    def policy(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return "ok"
        return {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}

    async with MockModelServer(policy) as server:
        await run_environment(ToolEnv(), base_config(server, tmp_path))
        sent = [request.body["messages"] for request in server.requests]
    path = tmp_path / "results.jsonl"
    raw = raw_lines(path)[1:]
    read = read_results(path).rollouts
    assert [r.to_json() for r in read] == sorted(raw, key=lambda r: r["group_index"])
    for record in read:
        transcript = record.messages
        assert transcript is not None and len(transcript) == 4
        # what the model saw on its last call (an assistant turn's null content beside its
        # tool calls is sent as "", recorded as the server gave it)
        assert list(messages_as_sent(transcript[:3])) in sent
        assert transcript[1]["content"] is None
        assert transcript[3] == {"role": "assistant", "content": "ok"}
        [log] = record.logs
        assert set(log) == {"time", "level", "logger", "message"}
        assert (log["level"], log["logger"], log["message"]) == (
            "WARNING",
            "user.reward",
            "final reply ok",
        )


async def test_run_group_records_are_filed_under_the_rollouts_they_name(tmp_path: Path) -> None:
    class GroupFailEnv(NumberEnv):
        async def compute_group_rewards(self, rollouts):  # type: ignore[no-untyped-def]
            raise RuntimeError("group hook down")

    env = GroupFailEnv()
    env.payloads = [{"value": 1, "fail": "sandbox_error"}]
    await run_environment(env, number_config(tmp_path))
    by_index = {r.group_index: r for r in read_results(tmp_path / "results.jsonl").rollouts}
    failed = by_index[1]
    assert [log["message"] for log in failed.logs] == [
        f"benchmax.rollout.failed rollout_id={failed.rollout_id} "
        "termination_reason=sandbox_error: rollout 1 failed on purpose"
    ]
    assert "RolloutFailure" in failed.logs[0]["exception"]
    for k in (0, 2):  # the group step scored these two, and its failure is theirs
        [log] = by_index[k].logs
        assert log["message"] == (
            "benchmax.rollout.failed rollout_id=group termination_reason=group_reward_error: "
            "group hook down"
        )
        assert by_index[k].termination_reason == "group_reward_error"


# --- the pinned format ---------------------------------------------------------------------

PINNED = Path(__file__).parent / "data" / "results-v1.jsonl"
PINNED_DEFINITION = {
    "env": {"class": "tests.runner.sample_envs:NumberEnv"},
    "split": "eval",
    "model": "m",
    "base_url": "http://unused.invalid/v1",
    "group_size": 2,
    "max_examples": 3,
}


def test_the_pinned_v1_file_reads_as_it_always_has() -> None:
    results = read_results(PINNED)
    assert results.header["format"] == "benchmax.results/1"
    assert results.header["run_id"] == "20260101T000000-abcdef"
    assert results.definition == PINNED_DEFINITION
    assert [(r.example_index, r.group_index, r.attempt) for r in results.rollouts] == [
        (0, 0, 1),
        (0, 1, 1),
        (2, 0, 2),
        (2, 1, 2),
    ]
    first = results.rollouts[0]
    assert first == Trajectory.from_json(
        {
            "type": "rollout",
            "run_id": "20260101T000000-abcdef",
            "split": "eval",
            "example_id": "ex-0",
            "example_index": 0,
            "group_index": 0,
            "rollout_id": "20260101T000000-abcdef.e0.a1-0001.r0",
            "attempt": 1,
            "termination_reason": "finished",
            "rewards": {"hit": 1.0, "value": 0.0},
            "timings": {"group_seconds": 0.25},
            "transcript": [
                {"role": "user", "content": "zero \ud800"},
                {"role": "assistant", "content": "0"},
            ],
            "logs": [
                {
                    "time": "2026-01-01T00:00:00.000+00:00",
                    "level": "WARNING",
                    "logger": "user.env",
                    "message": "first",
                }
            ],
        }
    )
    assert first.usage is None  # written before usage existed: readers accept that
    assert first.model_calls == () and first.annotations == {}  # nor were these
    assert results.rollouts[2].usage == {"prompt_tokens": 3, "completion_tokens": 1}


def test_the_pinned_v1_file_resumes(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(PINNED.read_bytes())
    store = ResultsStore.open(path, RunDefinition(PINNED_DEFINITION))
    try:
        assert sorted(store.groups) == [0, 2]
        assert store.is_complete(0, "ex-0") and not store.is_complete(1, "ex-1")
        assert store.next_attempt(1) == 2  # attempt 1 of example 1 is partial
        assert store.next_attempt(2) == 3
        assert store.next_attempt(5) == 1
        assert store.run_id == "20260101T000000-abcdef"
    finally:
        store.close()
    assert path.read_bytes() == PINNED.read_bytes()[: PINNED.read_bytes().rfind(b"\n") + 1]


async def test_the_pinned_v1_file_is_completed_by_a_run(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(PINNED.read_bytes())
    env = NumberEnv(3)
    config = number_config(tmp_path, group_size=2, max_examples=3, force=True)
    report = await run_environment(env, config)
    assert env.started == [1] and report.groups_resumed == 2 and report.groups == 3
    rollouts = read_results(path).rollouts
    assert [(r.example_index, r.attempt) for r in rollouts] == [
        (0, 1),
        (0, 1),
        (1, 2),
        (1, 2),
        (2, 2),
        (2, 2),
    ]
    assert rollouts[0].messages is not None
    assert rollouts[0].messages[0]["content"] == "zero \ud800"


async def test_a_group_with_an_extra_line_or_mixed_examples_is_not_complete(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    await run_environment(NumberEnv(2), number_config(tmp_path))
    header, *rollouts = raw_lines(path)
    extra = [*rollouts[:3], rollouts[0], *rollouts[3:]]  # group 0 has 4 lines for size 3
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *extra]))
    assert {r.example_index for r in read_results(path).rollouts} == {1}
    mixed = [dict(r) for r in rollouts]
    mixed[4]["example_id"] = "ex-other"  # group 1's lines name two examples
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *mixed]))
    assert {r.example_index for r in read_results(path).rollouts} == {0}


def test_the_next_attempt_follows_the_highest_attempt_in_any_order(tmp_path: Path) -> None:
    lines = PINNED.read_bytes().splitlines(keepends=True)
    header, rollouts = lines[0], [line for line in lines[1:-1] if line.strip()]
    path = tmp_path / "results.jsonl"
    path.write_bytes(header + b"".join(reversed(rollouts)))  # attempt 2 before attempt 1
    store = ResultsStore.open(path, RunDefinition(PINNED_DEFINITION))
    store.close()
    assert store.next_attempt(2) == 3 and sorted(store.groups) == [0, 2]


def test_runner_errors_survive_pickling(tmp_path: Path) -> None:
    import pickle

    contract = GroupContractError(
        3, "ex-3", KeyError("k"), hook="Env.run_rollout", log_path=tmp_path / "x.error.log"
    )
    back = pickle.loads(pickle.dumps(contract))
    assert str(back) == str(contract) and back.hook == "Env.run_rollout"
    assert back.log_path == tmp_path / "x.error.log" and isinstance(back.__cause__, KeyError)
    write = ResultsWriteError(tmp_path / "r.jsonl", OSError(28, "No space left on device"))
    again = pickle.loads(pickle.dumps(write))
    assert type(again) is ResultsWriteError and str(again) == str(write)
    assert "No space left on device; the file ends at its last complete group" in str(again)


def test_secrets_are_masked_in_every_string_however_json_writes_them(tmp_path: Path) -> None:
    from benchmax.results import RunDefinition, TrajectoryGroup

    path = tmp_path / "results.jsonl"
    secrets = ['pa"ss\\wörd\n', "12345678"]
    store = ResultsStore.open(path, RunDefinition({"group_size": 1}, secrets=tuple(secrets)))
    record = Trajectory(
        rollout_id="ex-0.r0",
        example_id="ex-0",
        example_index=0,
        termination_reason="finished",
        rewards={"r": 123.0},
        messages=({"role": "assistant", "content": f"key {secrets[0]} and x12345678"},),
        logs=({"message": f"{secrets[0]}"},),  # type: ignore[typeddict-item]
        annotations={f"odd key {secrets[0]}": [("tuple", "12345678")]},
    )
    clean = replace(record, example_index=1, messages=None, logs=(), annotations={})
    store.append(TrajectoryGroup((record, clean)))
    store.close()
    raw = path.read_bytes()
    assert b"ss\\\\w" not in raw and "wörd".encode() not in raw
    lines = raw_lines(path)[1:]
    assert lines[0]["transcript"] == [{"role": "assistant", "content": "key *** and x***"}]
    assert lines[0]["logs"] == [{"message": "***"}]
    assert lines[0]["annotations"]["odd key ***"] == [["tuple", "***"]]
    assert lines[0]["rewards"] == {"r": 123.0} and lines[1]["rewards"] == {"r": 123.0}
    assert lines[1] == json.loads(json.dumps(clean.to_json()))
