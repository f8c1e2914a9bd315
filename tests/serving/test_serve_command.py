"""The ``benchmax serve`` command: a real process, driven by openenv-core's client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from openenv.core.generic_client import GenericEnvClient
from tests.serving.conftest import EXAMPLES, ROOT

from benchmax.cli import cli
from benchmax.serving import ServeOptions

BOUND = 120.0

DEFAULT_SLOW_CLIENT_SECONDS = 60.0
"""``--header-timeout`` and ``--body-timeout``'s defaults."""


def benchmax_serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "serve", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def listening_url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    for line in process.stderr:  # ends when the process exits
        match = re.search(r" on (http://127\.0\.0\.1:\d+)", line)
        if match:
            return match.group(1)
    raise AssertionError(f"benchmax serve exited with {process.wait()} before listening")


async def test_benchmax_serve_openenv_support_chat_episode_then_ctrl_c() -> None:
    process = benchmax_serve(
        str(EXAMPLES / "support_chat" / "env.py") + ":SupportChatEnv",
        "--protocol", "openenv",
        "--data", str(EXAMPLES / "support_chat"),
        "--split", "eval",
        "--port", "0",
        "--env-arg", "judge_base_url=@mock",
        "--mock-policy", str(EXAMPLES / "support_chat" / "policy.py") + ":respond",
    )  # fmt: skip
    try:
        url = listening_url(process)
        async with GenericEnvClient(base_url=url, message_timeout_s=BOUND) as client:
            result = await client.reset(seed=0)
            assert result.observation["messages"][-1]["role"] == "user"
            lookup = {
                "id": "c1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "A17"}'},
            }
            action = {"message": {"role": "assistant", "content": None, "tool_calls": [lookup]}}
            result = await client.step(action)
            assert "A17" in result.observation["messages"][0]["content"]
            answer = {"message": {"role": "assistant", "content": "Your refund was issued."}}
            result = await client.step(answer)
            while not result.done:  # the simulated customer answers until it stops
                result = await client.step(answer)
            final = result.observation
            assert final["termination_reason"] == "finished"
            assert set(final["rewards"]) == {
                "resolved",
                "rubric_grounded",
                "rubric_unsupported_promise",
            }
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=BOUND) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["examples/quickstart/env.py:QuickStartEnv"], "Missing option '--protocol'"),
        (
            ["examples/quickstart/env.py:Nope", "--protocol", "openenv"],
            "has no 'Nope'",
        ),
        (
            [
                "examples/quickstart/env.py:QuickStartEnv",
                "--protocol",
                "openenv",
                "--data",
                "nowhere",
            ],
            "data directory not found: nowhere",
        ),
        (
            ["examples/quickstart/env.py:QuickStartEnv", "--protocol", "grpc"],
            "'grpc' is not one of 'openenv', 'nemo-gym'",
        ),
        (
            [
                "examples/quickstart/env.py:QuickStartEnv",
                "--protocol",
                "openenv",
                "--session-timeout",
                "-1",
            ],
            "not a positive number of seconds",
        ),
        (
            [
                "examples/quickstart/env.py:QuickStartEnv",
                "--protocol",
                "openenv",
                "--auth",
                "judge=UNSET_VARIABLE_X",
            ],
            "UNSET_VARIABLE_X, which is not set",
        ),
        (
            [
                "examples/quickstart/env.py:QuickStartEnv",
                "--protocol",
                "openenv",
                "--data",
                "examples",
            ],
            "cannot serve QuickStartEnv's train split",
        ),
        *(
            (
                [
                    "examples/quickstart/env.py:QuickStartEnv",
                    "--protocol",
                    "openenv",
                    option,
                    value,
                ],
                f"Invalid value for '{option}': '{value}' is not a positive number of seconds",
            )
            for option in ("--header-timeout", "--body-timeout", "--write-timeout")
            for value in ("nan", "inf", "1e400", "0", "-3")
        ),
    ],
)
def test_serve_errors_are_one_line(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output


def test_serve_help_names_every_option() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    for option in ("--protocol", "--data", "--env-arg", "--auth", "--split", "--host", "--port",
                   "--max-sessions", "--session-timeout"):  # fmt: skip
        assert option in result.output
    assert Path(ROOT / "src" / "benchmax" / "serving").is_dir()


def test_a_missing_train_split_names_its_file_and_suggests_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ROOT / "examples/quickstart/eval.jsonl", tmp_path / "eval.jsonl")
    monkeypatch.chdir(ROOT)
    target = "examples/quickstart/env.py:QuickStartEnv"
    result = CliRunner().invoke(
        cli, ["serve", target, "--protocol", "openenv", "--data", str(tmp_path)]
    )
    assert result.exit_code != 0
    assert (
        f"its data file {tmp_path / 'train.jsonl'} does not exist; --split eval serves the "
        "eval split"
    ) in " ".join(result.output.split()), result.output
    assert "Errno" not in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


async def _held_until_dropped(url: str, data: bytes) -> tuple[float, bytes]:
    """Open a connection to ``url``, send ``data`` and nothing more; the seconds until the
    server closes it and what it answered (``TimeoutError`` past ``BOUND``)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    began = time.monotonic()
    writer.write(data)
    await writer.drain()
    answered = b""
    try:
        async with asyncio.timeout(BOUND):
            with contextlib.suppress(ConnectionError):
                while chunk := await reader.read(65536):
                    answered += chunk
        return time.monotonic() - began, answered
    finally:
        writer.close()


async def test_benchmax_serve_applies_its_header_and_body_timeouts() -> None:
    """A running ``benchmax serve`` drops a slow client after ``--header-timeout`` /
    ``--body-timeout``, not after the 60 s defaults (the bound below is far above the 2 s
    set and far below the defaults; no speed is asserted)."""
    defaults = ServeOptions()
    assert defaults.header_timeout == defaults.body_timeout == DEFAULT_SLOW_CLIENT_SECONDS
    process = benchmax_serve(
        "examples/quickstart/env.py:QuickStartEnv",
        "--protocol", "openenv",
        "--data", "examples/quickstart",
        "--port", "0",
        "--header-timeout", "2",
        "--body-timeout", "2",
    )  # fmt: skip
    try:
        url = listening_url(process)
        slow_headers = _held_until_dropped(url, b"POST /reset HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        silent = _held_until_dropped(url, b"")
        half_body = _held_until_dropped(
            url,
            b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"seed": ',
        )
        (
            (header_s, header_answer),
            (silent_s, silent_answer),
            (body_s, body_answer),
        ) = await asyncio.gather(slow_headers, silent, half_body)
        assert (header_answer, silent_answer) == (b"", b"")  # closed without a reply
        assert body_answer.startswith(b"HTTP/1.1 408"), body_answer
        assert b"--body-timeout" in body_answer
        for seconds in (header_s, silent_s, body_s):
            assert 1.0 <= seconds < DEFAULT_SLOW_CLIENT_SECONDS - 15, seconds
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=BOUND) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
