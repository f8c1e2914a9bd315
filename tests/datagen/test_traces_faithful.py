"""Issue 28 kind 9: logs become rows faithfully. LiteLLM's ``model_parameters.tools`` give
rows ``tools``; reasoning in a logged (or teacher's) reply never becomes ground truth;
replies the output limit cut are dropped and counted (LiteLLM, request-response, OTel);
OTel image parts are kept as ``image_url`` parts, and parts with no chat equivalent drop
the row (counted); a killed run's spill directory and temporary files are removed by the
next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.cli.conftest import REPO, ThreadedServer

from benchmax.datagen import TracesConfig, traces

TOOLS = [
    {
        "type": "function",
        "function": {"name": "refund", "parameters": {"type": "object", "properties": {}}},
    }
]
CONFIG = TracesConfig(dedupe=None, eval_fraction=0)


def litellm(content: str, *, finish: str = "stop", line: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{line}",
        "call_type": "acompletion",
        "status": "success",
        "model": "gpt-test",
        "session_id": f"s{line}",
        "messages": [{"role": "user", "content": f"question {line}"}],
        "response": {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": content},
                }
            ]
        },
        **extra,
    }


def rows(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for name in ("train.jsonl", "eval.jsonl")
        for line in (directory / name).read_text().splitlines()
    ]


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


async def test_litellm_tools_reasoning_and_cut_replies(tmp_path: Path) -> None:
    log = write_lines(
        tmp_path / "proxy.jsonl",
        [
            litellm("Refunded.", line=1, model_parameters={"temperature": 0, "tools": TOOLS}),
            litellm("<think>the user wants 4</think>The answer is 4.", line=2),
            litellm("<THINK type='x'>only thinking, never closed", line=3),
            litellm("A reply cut in the midd", finish="length", line=4),
            litellm("Another cut one", finish="max_tokens", line=5),
        ],
    )
    summary = await traces([log], tmp_path / "out", CONFIG)
    by_line = {row["source"]["line"]: row for row in rows(tmp_path / "out")}
    assert sorted(by_line) == [1, 2]
    assert by_line[1]["tools"] == TOOLS
    assert by_line[2]["ground_truth"] == "The answer is 4."
    assert summary.dropped == {"cut_by_length": 2, "empty_reply": 1}


async def test_request_response_cut_replies_are_dropped(tmp_path: Path) -> None:
    def record(finish: str, n: int) -> dict[str, Any]:
        return {
            "request": {"messages": [{"role": "user", "content": f"q{n}"}]},
            "response": {
                "choices": [
                    {"finish_reason": finish, "message": {"role": "assistant", "content": f"a{n}"}}
                ]
            },
        }

    log = write_lines(tmp_path / "gw.jsonl", [record("stop", 1), record("length", 2)])
    summary = await traces([log], tmp_path / "out", CONFIG)
    assert [row["ground_truth"] for row in rows(tmp_path / "out")] == ["a1"]
    assert summary.dropped == {"cut_by_length": 1}


def _span(span_id: str, inputs: list[Any], outputs: list[Any], **attributes: Any) -> dict[str, Any]:
    values = [
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(inputs)}},
        {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(outputs)}},
        {"key": "gen_ai.conversation.id", "value": {"stringValue": f"c-{span_id}"}},
    ]
    for key, value in attributes.items():
        values.append({"key": key.replace("__", "."), "value": value})
    return {"spanId": span_id, "startTimeUnixNano": "1764590000000000000", "attributes": values}


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "content": "Look:"}, *parts]}]


def _reply(text: str, finish: str | None = None) -> list[dict[str, Any]]:
    message: dict[str, Any] = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    if finish is not None:
        message["finish_reason"] = finish
    return [message]


async def test_otel_images_kept_other_media_and_cut_replies_dropped(tmp_path: Path) -> None:
    blob = {"type": "blob", "modality": "image", "mime_type": "image/jpeg", "content": "AAEC"}
    uri = {"type": "uri", "modality": "image", "uri": "https://example.com/cat.png"}
    spans = [
        _span("a1", _user(blob), _reply("a cat")),
        _span("a2", _user(uri), _reply("another cat")),
        _span("a3", _user({"type": "file", "modality": "image", "file_id": "file-1"}), _reply("x")),
        _span("a4", _user({"type": "blob", "modality": "audio", "content": "UklG"}), _reply("y")),
        _span("a5", _user(), _reply("cut", finish="length")),
        _span(
            "a6",
            _user(),
            _reply("cut too"),
            gen_ai__response__finish_reasons={
                "arrayValue": {"values": [{"stringValue": "length"}]}
            },
        ),
        _span(
            "a7",
            _user(),
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "reasoning", "content": "thinking it over"},
                        {"type": "text", "content": "plain answer"},
                    ],
                }
            ],
        ),
    ]
    document = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    log = tmp_path / "otel.json"
    log.write_text(json.dumps(document))
    summary = await traces([log], tmp_path / "out", CONFIG)
    kept = {row["source"]["span_id"]: row for row in rows(tmp_path / "out")}
    assert sorted(kept) == ["a1", "a2", "a7"]
    assert kept["a1"]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAEC"}},
            ],
        }
    ]
    assert kept["a2"]["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/cat.png"},
    }
    assert kept["a7"]["ground_truth"] == "plain answer"
    assert summary.dropped == {"cut_by_length": 2, "unsupported_content": 2}


async def test_a_teachers_reasoning_is_no_ground_truth(tmp_path: Path) -> None:
    from benchmax.auth import StaticBearerAuth
    from benchmax.rewards import Judge

    reply = json.dumps({"reply": "<think>let me see</think>Use the refund form."})
    log = write_lines(tmp_path / "proxy.jsonl", [litellm("logged", line=1)])
    with ThreadedServer(lambda body, recorded: reply) as server:
        teacher = Judge(model="m", base_url=server.base_url, auth=StaticBearerAuth("k" * 12))
        await traces([log], tmp_path / "out", CONFIG, teacher=teacher)
    (row,) = rows(tmp_path / "out")
    assert row["ground_truth"] == "Use the refund form."
    assert row["relabeled"]["logged_ground_truth"] == "logged"


def _leftovers(directory: Path) -> list[str]:
    return sorted(
        p.name for p in directory.iterdir() if p.name.startswith((".traces-", ".train", ".eval"))
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses SIGKILL")
async def test_a_killed_runs_spill_is_removed_by_the_next_run(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = write_lines(
        tmp_path / "logs" / "proxy.jsonl", [litellm(f"reply {i}", line=i) for i in range(5)]
    )
    out = tmp_path / "out"

    async def hold(body: dict[str, Any], recorded: Any) -> str:  # the teacher never answers
        import asyncio

        await asyncio.Event().wait()
        return ""

    with ThreadedServer(hold) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmax.cli",
                "traces",
                str(log.parent),
                "-o",
                str(out),
                "--teacher-model",
                "m",
                "--teacher-base-url",
                server.base_url,
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while not server.requests:  # relabeling: the spill and temporary files exist
                assert process.poll() is None, "traces ended before asking the teacher"
                assert time.monotonic() < deadline, "the teacher was never asked"
                time.sleep(0.05)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(60)
    left = _leftovers(out)
    assert any(name.startswith(f".traces-{process.pid}-") for name in left), left
    # A live run's scratch is not touched: this process's own pid stands for one.
    live = out / f".traces-{os.getpid()}-live"
    live.mkdir()
    await traces([log], out, CONFIG)
    assert _leftovers(out) == [live.name]
    assert len(rows(out)) == 5
