"""Run behaviours against llama-cpp-python's server serving the SmolLM2 GGUF file as is.

Run with ``bash .ci/real-servers llamacpp`` (builds llama-cpp-python from source once:
25-50 minutes on 2 cores). It returns no token ids, so ``--tokens`` is refused before the
run; its pydantic request types refuse ``content: null`` beside tool calls, which benchmax
therefore sends as ``""``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.real_servers._recording import RecordingProxy
from tests.real_servers._servers import RunningServer
from tests.real_servers.support import (
    CALCULATOR,
    QUICKSTART,
    benchmax_run,
    one_line_error,
    trajectories,
    write_rows,
)

pytestmark = pytest.mark.llamacpp


@pytest.fixture
def proxy(llamacpp: RunningServer) -> Any:
    with RecordingProxy(llamacpp.root) as recording:
        yield recording


def test_quickstart_run(llamacpp: RunningServer, proxy: RecordingProxy, tmp_path: Path) -> None:
    output = tmp_path / "quick.jsonl"
    done = benchmax_run(
        proxy.base_url, llamacpp.model, *QUICKSTART, "--split", "train", "-n", 2, "-k", 2,
        "--temperature", 0.7, "--max-tokens", 32, "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = trajectories(output)
    assert len(records) == 4 and len(proxy.chat()) == 4
    assert {t.termination_reason for t in records} <= {"finished", "output_exceeded"}
    assert all(t.usage and t.usage.get("completion_tokens") for t in records)


def test_overflow_is_context_exceeded(
    llamacpp: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    rows = [{"prompt": "word " * 2100 + "How many words?", "ground_truth": "2100"}]
    data = write_rows(tmp_path / "data", "eval", rows)
    output = tmp_path / "overflow.jsonl"
    done = benchmax_run(
        proxy.base_url, llamacpp.model, QUICKSTART[0], "--data", data, "--split", "eval",
        "-k", 1, "--max-tokens", 16, "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert [t.termination_reason for t in trajectories(output)] == ["context_exceeded"]
    (refused,) = proxy.chat()
    assert refused.status == 400
    assert refused.reply["error"]["code"] == "context_length_exceeded"


def test_named_tool_choice_multi_turn(
    llamacpp: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    """A named tool choice forces a call each turn; the second request carries the first
    call's assistant message with ``content: ""`` and the server takes it."""
    output = tmp_path / "tools.jsonl"
    choice = json.dumps({"type": "function", "function": {"name": "add"}})
    done = benchmax_run(
        proxy.base_url, llamacpp.model, *CALCULATOR, "--split", "eval", "-n", 1, "-k", 2,
        "--sampling-arg", f"tool_choice={choice}", "--temperature", 0.7, "--max-tokens", 64,
        "--model-retries", 2, "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(e.status == 200 for e in proxy.chat()), [e.reply for e in proxy.chat()]
    later = [e for e in proxy.chat() if len(e.body["messages"]) > 2]
    assert later
    for exchange in later:
        for message in exchange.body["messages"]:
            if message["role"] == "assistant" and message.get("tool_calls"):
                assert message["content"] == ""
    for trajectory in trajectories(output):
        assert trajectory.termination_reason == "max_turns_exceeded", trajectory.logs
        assistant = [m for m in trajectory.messages or () if m["role"] == "assistant"]
        assert len(assistant) == 4
        assert all(m["tool_calls"][0]["function"]["name"] == "add" for m in assistant)
        assert all(m["content"] is None for m in assistant)  # recorded as the server sent it


def test_tokens_are_refused_before_the_run(
    llamacpp: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    done = benchmax_run(
        proxy.base_url, llamacpp.model, *QUICKSTART, "--split", "train", "-n", 1,
        "--tokens", "-o", tmp_path / "tokens.jsonl",
    )  # fmt: skip
    line = one_line_error(done)
    assert "tokens preflight:" in line and "cannot return exact tokens" in line
    assert len(proxy.chat()) == 1  # the preflight call only
