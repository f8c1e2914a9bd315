"""``python -m benchmax.testing``: the standalone mock server."""

from __future__ import annotations

import asyncio
import signal
import sys

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
        line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
        assert line.startswith("mock model server listening on http://127.0.0.1:")
        base_url = line.rsplit(" ", 1)[1].strip()
        async with httpx.AsyncClient(verify=False) as client:
            response = await client.post(
                f"{base_url}/chat/completions",
                json={"messages": [{"role": "user", "content": "standalone"}]},
            )
        assert response.json()["choices"][0]["message"]["content"] == "standalone"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 10) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("policy", ["nonsense", "no_such_module_xyz:f"])
def test_bad_policy_exits_2_with_one_line(policy: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["--policy", policy]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert err.count("\n") == 1


def test_busy_port_exits_1(capsys: pytest.CaptureFixture) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["--port", str(port)]) == 1
    assert "cannot serve" in capsys.readouterr().err
