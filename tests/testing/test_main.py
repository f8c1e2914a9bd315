"""``python -m benchmax.testing``: the standalone mock server."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from benchmax.testing.__main__ import main


async def test_standalone_server_serves_and_stops_on_sigterm() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmax.testing",
        "--port",
        "0",
        "--policy",
        "benchmax.testing:echo",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line.startswith("mock model server listening on http://127.0.0.1:")
        base_url = line.rsplit(" ", 1)[1].strip()
        async with httpx.AsyncClient(verify=False) as client:
            response = await client.post(
                f"{base_url}/chat/completions",
                json={"messages": [{"role": "user", "content": "standalone"}]},
            )
        assert response.json()["choices"][0]["message"]["content"] == "standalone"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 60) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_help_describes_every_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmax.testing", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("usage: python -m benchmax.testing")
    for option in ("--host", "--port", "--policy", "--no-record"):
        assert option in result.stdout


@pytest.mark.parametrize(
    "policy",
    [
        "nonsense",
        "no_such_module_xyz:f",
        "benchmax.testing:missing",
        "BROKEN_FILE:answer",
        "BAD_SYNTAX:answer",
    ],
)
def test_bad_policy_exits_2_with_one_line(
    policy: str, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    broken = tmp_path / "broken_policy_module.py"
    broken.write_text("raise RuntimeError('boom\\nsecond line')\n")
    bad_syntax = tmp_path / "bad_syntax_policy.py"
    bad_syntax.write_text("def answer(body:\n")
    policy = policy.replace("BROKEN_FILE", str(broken)).replace("BAD_SYNTAX", str(bad_syntax))
    assert main(["--policy", policy]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert "broken_policy_module" not in sys.modules


def test_invalid_port_exits_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["--port", "70000"]) == 2
    assert capsys.readouterr().err == "error: mock server port must be an integer from 0 to 65535\n"


def test_busy_port_exits_1(capsys: pytest.CaptureFixture) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["--port", str(port)]) == 1
    assert "cannot serve" in capsys.readouterr().err
