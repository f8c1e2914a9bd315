"""``traces``: production logs in four formats into train/eval rows (``benchmax.datagen``)."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmax.auth import InjectedAuth, StaticBearerAuth, bind_model_auth
from benchmax.datagen import (
    LoggedCall,
    MalformedRecord,
    Scrubber,
    TraceFormatError,
    TracesConfig,
    TracesError,
    detect_format,
    luhn_valid,
    read_trace_file,
    traces,
)
from benchmax.rewards import Judge
from benchmax.testing import MockModelServer

SAMPLES = Path(__file__).parent / "trace_samples"
LOG_FILES = ("finetune.jsonl", "gateway.jsonl", "litellm_proxy.jsonl", "otel_export.json")
SECRETS = (
    "AKIAIOSFODNN7EXAMPLE",
    "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "ghp_Z8xk2LmQ4rT7vW1yB3nD5fH9jK0pS6uA2cE4",
    "dana.ortiz@example.com",
    "4242 4242 4242 4242",
    "5555 5555 5555 4444",
    "415 555 2671",
)


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """The four sample logs (not the access log) in a directory of their own."""
    directory = tmp_path / "logs"
    directory.mkdir()
    for name in LOG_FILES:
        shutil.copy(SAMPLES / name, directory / name)
    return directory


def calls_of(name: str) -> list[LoggedCall | MalformedRecord]:
    path = SAMPLES / name
    return list(read_trace_file(path, detect_format(path)))


# ---- formats -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("litellm_proxy.jsonl", "litellm"),
        ("gateway.jsonl", "request-response"),
        ("finetune.jsonl", "messages"),
        ("otel_export.json", "otel"),
    ],
)
def test_each_sample_is_detected_by_its_first_record(name: str, kind: str) -> None:
    assert detect_format(SAMPLES / name) == kind


def test_litellm_payload_fields_become_the_call_and_its_source() -> None:
    items = calls_of("litellm_proxy.jsonl")
    first = items[0]
    assert isinstance(first, LoggedCall)
    assert first.conversation_id == "sess-billing-17" and first.user == "cust-5521"
    assert first.model == "gpt-4o-mini" and first.span_id == "chatcmpl-8f2a01"
    assert first.time == "2025-12-01T10:00:01Z" and first.line == 1
    assert first.reply is not None and first.reply["content"].startswith("The second charge")
    failed = items[2]
    assert isinstance(failed, LoggedCall) and failed.failed and failed.reply is None
    torn = items[-1]
    assert isinstance(torn, MalformedRecord) and torn.line == 6 and "not JSON" in torn.reason


def test_otel_spans_read_through_the_genai_conventions() -> None:
    items = calls_of("otel_export.json")
    assert all(isinstance(item, LoggedCall) for item in items)
    calls = [item for item in items if isinstance(item, LoggedCall)]
    assert len(calls) == 3  # the execute_tool span has no messages
    first, second, failed = calls
    assert first.history[0] == {"role": "system", "content": "You book trains in Europe."}
    assert first.model == "gpt-4.1-2025-04-14" and first.conversation_id == "trip-881"
    assert first.user == "traveler-12" and first.span_id == "eee19b7ec3c1b174"
    assert first.reply is not None and first.reply["tool_calls"][0]["function"]["name"] == (
        "search_trains"
    )
    assert second.history[-1] == {
        "role": "tool",
        "tool_call_id": "call_t1",
        "content": "TGV 6603 dep 07:56 arr 09:52",
    }
    assert failed.failed and failed.reply is None


def test_messages_jsonl_gives_every_assistant_turn_with_the_history_before_it() -> None:
    calls = [c for c in calls_of("finetune.jsonl") if isinstance(c, LoggedCall)]
    second_line = [c for c in calls if c.line == 2]
    assert [len(c.history) for c in second_line] == [1, 3, 5]
    assert second_line[-1].reply == {
        "role": "assistant",
        "content": "10 miles is about 16.09 kilometers.",
    }


def test_a_file_in_no_known_format_is_refused_naming_it_and_what_was_expected(
    tmp_path: Path,
) -> None:
    with pytest.raises(TraceFormatError) as caught:
        detect_format(SAMPLES / "access.jsonl")
    message = str(caught.value)
    assert "access.jsonl" in message and "method, path, status, ts" in message
    assert "LiteLLM" in message and "resourceSpans" in message and '"messages"' in message
    with pytest.raises(TraceFormatError, match=r"access\.jsonl"):
        asyncio.run(traces([SAMPLES], tmp_path / "out"))
    assert not (tmp_path / "out" / "train.jsonl").exists()


def test_a_first_record_that_is_not_an_object_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("[1, 2]\n")
    with pytest.raises(TraceFormatError, match=r"its first record is an array, not an object\)"):
        detect_format(path)


def test_records_of_the_wrong_shape_are_skipped_with_a_plain_reason(tmp_path: Path) -> None:
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    bad_reply = {"role": "assistant", "content": "a", "tool_calls": "bad"}
    odd_question = {"role": "user", "content": {"a": 1}}
    records: list[Any] = [
        good,
        [1, 2],
        "text",
        None,
        {"messages": [odd_question, {"role": "assistant", "content": "b"}]},
        {"messages": [{"role": "user", "content": "q"}, bad_reply]},
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    read = list(read_trace_file(path, detect_format(path)))
    assert [type(item).__name__ for item in read] == ["LoggedCall"] + ["MalformedRecord"] * 5
    assert [item.reason for item in read if isinstance(item, MalformedRecord)] == [
        "an array, not a JSON object",
        "a string, not a JSON object",
        "null, not a JSON object",
        "messages holds a message whose content is an object "
        "(expected text, null or a list of content parts)",
        "messages holds a message whose tool_calls is a string (expected a list of tool calls)",
    ]


def test_a_file_starting_with_a_utf8_byte_order_mark_is_read(tmp_path: Path) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path = tmp_path / "excel-export.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(chat).encode() + b"\r\n")
    assert detect_format(path) == "messages"
    [call] = read_trace_file(path, "messages")
    assert isinstance(call, LoggedCall) and call.reply == chat["messages"][1]
    document = json.loads((SAMPLES / "otel_export.json").read_text())
    spans = tmp_path / "spans.json"
    spans.write_bytes(b"\xef\xbb\xbf" + json.dumps(document, indent=2).encode())
    assert detect_format(spans) == "otel"
    assert any(isinstance(c, LoggedCall) for c in read_trace_file(spans, "otel"))


def test_a_response_message_of_the_wrong_shape_is_skipped(tmp_path: Path) -> None:
    response = {"choices": [{"message": {"role": "assistant", "content": 42}}]}
    record = {"request": {"model": "m", "messages": [{"role": "user", "content": "q"}]}}
    path = tmp_path / "gateway.jsonl"
    path.write_text(json.dumps({**record, "response": response}) + "\n")
    [item] = read_trace_file(path, detect_format(path))
    assert isinstance(item, MalformedRecord)
    assert item.reason == (
        "the response's message content is a number "
        "(expected text, null or a list of content parts)"
    )


def test_an_otel_file_written_as_one_pretty_printed_document_is_read(tmp_path: Path) -> None:
    document = json.loads((SAMPLES / "otel_export.json").read_text())
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(document, indent=2))
    calls = list(read_trace_file(path, detect_format(path)))
    assert len(calls) == 3 and all(isinstance(c, LoggedCall) for c in calls)


# ---- the pipeline --------------------------------------------------------------------


async def test_all_formats_together_give_scrubbed_rows_with_their_sources(
    logs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "data"
    summary = await traces([logs], out)
    written = rows(out / "train.jsonl") + rows(out / "eval.jsonl")
    assert summary.rows == len(written) == 10
    text = (out / "train.jsonl").read_text() + (out / "eval.jsonl").read_text()
    for secret in SECRETS:
        assert secret not in text
    assert summary.scrubbed == {"api_key": 7, "bearer_token": 0, "card": 2, "email": 2, "phone": 1}
    assert summary.dropped == {"failed_call": 3, "near_duplicate": 1, "tool_only_reply": 2}
    assert summary.malformed == 4
    assert any(e.endswith("gateway.jsonl:4: not JSON (invalid literal, expected 'true': line 1 "
                          "column 1 (char 0))") for e in summary.malformed_examples)  # fmt: skip
    for row in written:
        assert ("prompt" in row) != ("messages" in row) and row["ground_truth"]
        assert {"file", "line", "conversation_id"} <= set(row["source"])
    tool_row = next(r for r in written if r["source"].get("span_id") == "gen-771")
    assert "-p [API_KEY] registry" in tool_row["tool_calls"][0]["function"]["arguments"]
    otel_tool = next(r for r in written if r["source"].get("span_id") == "eee19b7ec3c1b174")
    assert '"card":"[CARD]"' in otel_tool["tool_calls"][0]["function"]["arguments"]
    assert tool_row["tools"][0]["function"]["name"] == "run_shell"
    otel = next(r for r in written if r["source"].get("span_id") == "ff29b7ec3c1b1751")
    assert otel["source"] == {
        "file": str(logs / "otel_export.json"),
        "span_id": "ff29b7ec3c1b1751",
        "line": 1,
        "conversation_id": "trip-881",
        "user": "traveler-12",
        "model": "gpt-4.1",
        "time": "2025-12-01T11:53:22Z",
    }
    assert not list(out.glob(".traces-*"))  # the spill is gone


async def test_a_conversation_spanning_files_stays_on_one_side(logs: Path, tmp_path: Path) -> None:
    for seed in range(6):
        out = tmp_path / f"data{seed}"
        await traces([logs], out, TracesConfig(eval_fraction=0.5, seed=seed))
        sides = {
            (r["source"]["file"].rsplit("/", 1)[-1], side)
            for side in ("train", "eval")
            for r in rows(out / f"{side}.jsonl")
            if r["source"]["conversation_id"] == "sess-billing-17"
        }
        assert {file for file, _ in sides} == {"finetune.jsonl", "litellm_proxy.jsonl"}
        assert len({side for _, side in sides}) == 1


async def test_filters_models_tool_only_failed_and_length(logs: Path, tmp_path: Path) -> None:
    only = await traces([logs], tmp_path / "a", TracesConfig(models=("gpt-4o*",)))
    kept = rows(tmp_path / "a" / "train.jsonl") + rows(tmp_path / "a" / "eval.jsonl")
    assert {r["source"]["model"] for r in kept} == {"gpt-4o-mini", "gpt-4o"}
    assert only.dropped["model_filtered"] > 0
    tools = await traces([logs], tmp_path / "b", TracesConfig(keep_tool_only=True))
    assert "tool_only_reply" not in tools.dropped
    kept = rows(tmp_path / "b" / "train.jsonl") + rows(tmp_path / "b" / "eval.jsonl")
    assert any(r["ground_truth"] == "" and r["tool_calls"] for r in kept)
    short = await traces([logs], tmp_path / "c", TracesConfig(max_chars=120))
    assert short.dropped["too_long"] > 0
    assert all(
        len(r.get("prompt", "")) + len(r["ground_truth"]) <= 120
        for r in rows(tmp_path / "c" / "train.jsonl") + rows(tmp_path / "c" / "eval.jsonl")
    )


async def test_whole_conversations_keep_the_longest_history(logs: Path, tmp_path: Path) -> None:
    summary = await traces([logs], tmp_path / "out", TracesConfig(unit="conversation"))
    kept = rows(tmp_path / "out" / "train.jsonl") + rows(tmp_path / "out" / "eval.jsonl")
    conversations = [r["source"]["conversation_id"] for r in kept]
    assert len(conversations) == len(set(conversations))
    miles = next(r for r in kept if r["ground_truth"].startswith("10 miles"))
    assert len(miles["messages"]) == 5
    assert summary.dropped["earlier_turn"] > 0


async def test_exact_and_near_duplicates_are_removed_first_kept(tmp_path: Path) -> None:
    log = tmp_path / "dups.jsonl"
    reply = "Open Settings, then Security, then Reset."
    exchanges = [
        ("How do I reset my password?", reply),
        ("How do I reset my password?", reply),
        ("how do I reset my password", reply.replace(".", "!")),
        ("What is the capital of Peru?", "Lima."),
    ]
    lines = [
        {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}
        for q, a in exchanges
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = await traces([log], tmp_path / "out", TracesConfig(eval_fraction=0))
    assert summary.dropped == {"duplicate": 1, "near_duplicate": 1}
    kept = rows(tmp_path / "out" / "train.jsonl")
    assert [r["source"]["line"] for r in kept] == [1, 4]
    none = await traces([log], tmp_path / "exact", TracesConfig(dedupe=None, eval_fraction=0))
    assert none.dropped == {"duplicate": 1}


async def test_strict_stops_at_the_first_malformed_record(logs: Path, tmp_path: Path) -> None:
    with pytest.raises(TracesError, match=r"finetune\.jsonl:4: messages is not a list"):
        await traces([logs], tmp_path / "out", TracesConfig(strict=True))
    assert not (tmp_path / "out" / "train.jsonl").exists()


async def test_missing_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TracesError, match="input not found"):
        await traces([tmp_path / "nope.jsonl"], tmp_path / "out")


# ---- scrubbing -----------------------------------------------------------------------


def test_scrubber_replaces_each_kind_and_counts_it() -> None:
    scrubber = Scrubber()
    text = (
        "key sk-proj-abcdefghijklmnopqrstuvwxyz123, header Authorization: Bearer a1b2c3d4e5f6g7, "
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU, "
        "mail jo@example.org, call (212) 555-0147, card 4111-1111-1111-1111, "
        'password="hunter2hunter2", order 1234567, task-abcdefghijklmnopqrstuvwxyz123'
    )
    assert scrubber.text(text) == (
        "key [API_KEY], header Authorization: Bearer [BEARER_TOKEN], jwt [BEARER_TOKEN], "
        "mail [EMAIL], call [PHONE], card [CARD], "
        'password="[API_KEY]", order 1234567, task-abcdefghijklmnopqrstuvwxyz123'
    )
    assert dict(scrubber.counts) == {
        "api_key": 2, "bearer_token": 2, "email": 1, "phone": 1, "card": 1,
    }  # fmt: skip


def test_card_like_numbers_need_the_luhn_check() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    scrubber = Scrubber(("card",))
    assert scrubber.text("ref 4111 1111 1111 1112 ok") == "ref 4111 1111 1111 1112 ok"


def test_scrubbing_walks_tool_arguments_but_not_identifiers() -> None:
    scrubber = Scrubber()
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_sk-abcdefghijklmnopqrstuvwx", "type": "function",
             "function": {"name": "mail", "arguments": '{"to": "ann@example.com"}'}},
        ],
    }  # fmt: skip
    scrubbed = scrubber.value(message)
    assert scrubbed["tool_calls"][0]["id"] == "call_sk-abcdefghijklmnopqrstuvwx"
    assert scrubbed["tool_calls"][0]["function"]["arguments"] == '{"to": "[EMAIL]"}'


def test_unknown_scrub_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown scrub kind"):
        TracesConfig(scrub=("ssn",))


# ---- the split property --------------------------------------------------------------

_conversation = st.tuples(
    st.integers(0, 30),  # conversation number
    st.one_of(st.none(), st.integers(0, 6)),  # user number, when logged
    st.integers(1, 3),  # assistant turns
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    conversations=st.lists(_conversation, min_size=1, max_size=25),
    eval_fraction=st.floats(0, 0.9),
    seed=st.integers(0, 1000),
)
def test_no_conversation_or_user_is_on_both_sides(
    tmp_path_factory: pytest.TempPathFactory,
    conversations: list[tuple[int, int | None, int]],
    eval_fraction: float,
    seed: int,
) -> None:
    directory = tmp_path_factory.mktemp("split")
    lines = []
    for position, (number, user, turns) in enumerate(conversations):
        messages: list[dict[str, Any]] = []
        for turn in range(turns):
            messages.append({"role": "user", "content": f"question {position} {turn} of c{number}"})
            messages.append({"role": "assistant", "content": f"answer {position}/{turn} x{number}"})
        line: dict[str, Any] = {"conversation_id": f"c{number}", "messages": messages}
        if user is not None:
            line["user"] = f"user{user}"
        lines.append(json.dumps(line) + "\n")
    (directory / "log.jsonl").write_text("".join(lines))
    config = TracesConfig(eval_fraction=eval_fraction, seed=seed, dedupe=None)
    summary = asyncio.run(traces([directory / "log.jsonl"], directory / "out", config))
    train = rows(directory / "out" / "train.jsonl")
    evaluation = rows(directory / "out" / "eval.jsonl")
    assert summary.train_rows == len(train) and summary.eval_rows == len(evaluation)
    for key in ("conversation_id", "user"):
        left = {r["source"].get(key) for r in train} - {None}
        right = {r["source"].get(key) for r in evaluation} - {None}
        assert not left & right, key
    if eval_fraction > 0 and summary.train_groups + summary.eval_groups > 1:
        assert evaluation and train


# ---- teacher relabeling --------------------------------------------------------------


async def test_a_teacher_relabels_ground_truths_and_each_row_records_it(
    logs: Path, tmp_path: Path
) -> None:
    seen: list[str] = []

    def teacher_policy(body: dict[str, Any]) -> str:
        prompt = body["messages"][0]["content"]
        seen.append(prompt)
        if "Lisbon" in prompt:
            return "not json"
        return json.dumps({"reply": "teacher says hi"})

    async with MockModelServer(teacher_policy, record=False) as server:
        judge = Judge(model="teacher-1", base_url=server.base_url, auth=InjectedAuth("teacher"),
                      max_retries=0)  # fmt: skip
        with bind_model_auth({"teacher": StaticBearerAuth("teacher-key")}):
            summary = await traces([logs], tmp_path / "out", teacher=judge)
    kept = rows(tmp_path / "out" / "train.jsonl") + rows(tmp_path / "out" / "eval.jsonl")
    assert summary.relabeled + summary.relabel_failed == len(kept) == len(seen)
    assert summary.relabel_failed >= 1
    for row in kept:
        if "error" in row["relabeled"]:
            assert (
                row["relabeled"]["model"] == "teacher-1"
                and row["ground_truth"] != "teacher says hi"
            )
        else:
            assert row["ground_truth"] == "teacher says hi"
            assert row["relabeled"]["logged_ground_truth"]
    assert not any("dana.ortiz@example.com" in prompt for prompt in seen)  # scrubbed first


async def test_cancelling_stops_the_reading_thread_and_leaves_no_files(tmp_path: Path) -> None:
    line = json.dumps(
        {"messages": [{"role": "user", "content": "hello there " * 20},
                      {"role": "assistant", "content": "general kenobi " * 20}]}
    )  # fmt: skip
    log = tmp_path / "big.jsonl"
    log.write_text((line + "\n") * 60_000)
    reports: list[int] = []
    blocked, resume = threading.Event(), threading.Event()

    def on_progress(stage: str, done: int, total: int) -> None:  # in the reading thread
        reports.append(done)
        if done and not blocked.is_set():  # hold the thread until the task is cancelled,
            blocked.set()  # so a busy machine cannot let it read to the end first
            resume.wait(60)

    task = asyncio.create_task(traces([log], tmp_path / "out", on_progress=on_progress))
    while not blocked.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    resume.set()
    seen = -1
    for _ in range(120):  # the reading thread has stopped: no report for half a second
        if len(reports) == seen:
            break
        seen = len(reports)
        await asyncio.sleep(0.5)
    assert len(reports) == seen
    assert reports[-1] < log.stat().st_size
    assert not list((tmp_path / "out").iterdir())
