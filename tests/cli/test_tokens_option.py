"""``benchmax run --tokens`` and ``mock-serve --tokens`` (issue 17 part 3)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from click.testing import Result
from tests.cli.conftest import REPO, SAMPLE_ENVS, interruptible

ANSWER_ENV = f"{SAMPLE_ENVS}:AnswerEnv"
CALCULATOR = REPO / "examples" / "calculator"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1, text
    assert text.startswith("Error: ")
    return text


def test_a_server_without_tokens_stops_the_run_before_it_starts(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "out.jsonl"
    with threaded_server() as server:  # answers, but never with token ids
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "--base-url", server.base_url,
            "--model", "m", "--tokens", "-o", output,
        )  # fmt: skip
        chat = [r for r in server.requests if r.path.endswith("/chat/completions")]
    message = one_line_error(result)
    assert f"tokens preflight: m at {server.base_url} cannot return exact tokens" in message
    assert "the reply lacked prompt token ids" in message
    assert len(chat) == 1  # one preflight call, no rollout
    assert chat[0].body["return_token_ids"] is True and chat[0].body["max_tokens"] == 16
    assert not output.exists()


def test_a_refused_preflight_call_is_not_blamed_on_tokens(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    from benchmax.testing import Fault

    def refuse(body: dict) -> str:
        raise Fault.status(401, "bad key")

    with threaded_server(refuse, tokens=True) as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "--base-url", server.base_url,
            "--model", "m", "--tokens", "-o", tmp_path / "out.jsonl",
        )  # fmt: skip
    message = one_line_error(result)
    assert f"tokens preflight: the call to m at {server.base_url} failed: model_error" in message
    assert "cannot return exact tokens" not in message


def test_a_token_server_passes_the_preflight(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "out.jsonl"
    with threaded_server(tokens=True) as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "--base-url", server.base_url,
            "--model", "m", "--tokens", "-n", "2", "-k", "2", "-o", output,
        )  # fmt: skip
        chat = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    assert len(chat) == 1 + 4
    assert all(r.body["logprobs"] is True for r in chat)
    records = lines(output)
    assert records[0]["definition"]["tokens"] is True
    assert {r["termination_reason"] for r in records[1:]} == {"finished"}
    for record in records[1:]:
        (call,) = record["model_calls"]
        assert call["prompt_token_ids"][0] == 1  # <|im_start|>
        assert call["completion_token_ids"][-1] == 2  # <|im_end|>
        assert len(call["completion_logprobs"]) == len(call["completion_token_ids"])


def test_a_tokens_run_resumes_and_refuses_a_run_without_tokens(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "out.jsonl"
    common = ("run", ANSWER_ENV, "--data", answer_data, "-k", "2", "-o", output)
    first = invoke(*common, "-n", "2", "--tokens")
    assert first.exit_code == 0, first.output
    again = invoke(*common, "-n", "3", "--tokens", "--force")
    assert again.exit_code == 0 and "(2 resumed)" in again.output, again.output
    records = lines(output)
    assert len(records) == 1 + 6
    assert records[0]["definition"]["tokens"] is True
    assert all(r["model_calls"][0]["completion_token_ids"] for r in records[1:])
    refused = invoke(*common, "-n", "3")
    assert "tokens" in one_line_error(refused)


def test_mock_serve_tokens_answers_with_token_ids() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "mock-serve", "--port", "0", "--tokens"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "token mode, template chatml" in line, line
        base_url = line.split()[5]
        messages = [{"role": "user", "content": "hi"}]
        asked = httpx.post(
            f"{base_url}/chat/completions",
            json={"model": "m", "messages": messages, "logprobs": True, "return_token_ids": True},
            timeout=60,
        ).json()
        plain = httpx.post(
            f"{base_url}/chat/completions", json={"model": "m", "messages": messages}, timeout=60
        ).json()
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    choice = asked["choices"][0]
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) == 3  # "hi" + im_end
    assert asked["prompt_token_ids"][0] == 1  # <|im_start|>
    assert plain["prompt_token_ids"] is None and plain["choices"][0]["token_ids"] is None
    assert plain["choices"][0]["logprobs"] is None


def test_the_preflight_leaves_out_tool_only_sampling_args(
    invoke: Callable[..., Result], tmp_path: Path, threaded_server
) -> None:
    """vLLM refuses ``tool_choice`` without ``tools`` (HTTP 400); the preflight sends no
    tools, so it leaves ``tool_choice`` and ``parallel_tool_calls`` out, while every rollout
    sends them with the environment's tools."""
    from benchmax.testing import Fault

    def like_vllm(body: dict) -> Any:
        if "tool_choice" in body and not body.get("tools"):
            raise Fault.status(400, message="When using `tool_choice`, `tools` must be set.")
        if body.get("tools"):
            return {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}
        return "OK"

    output = tmp_path / "out.jsonl"
    with threaded_server(like_vllm, tokens=True) as server:
        result = invoke(
            "run", f"{CALCULATOR}/env.py:CalculatorEnv", "--data", CALCULATOR,
            "--base-url", server.base_url, "--model", "m", "--tokens", "-n", "1", "-k", "1",
            "--sampling-arg", "tool_choice=required", "--sampling-arg", "parallel_tool_calls=false",
            "-o", output,
        )  # fmt: skip
        chat = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    preflight, *rollout = chat
    assert "tool_choice" not in preflight.body and "parallel_tool_calls" not in preflight.body
    assert rollout and all(r.body["tool_choice"] == "required" for r in rollout)
    assert all(r.body["parallel_tool_calls"] is False and r.body["tools"] for r in rollout)
    (record,) = lines(output)[1:]
    assert record["termination_reason"] == "max_turns_exceeded"
