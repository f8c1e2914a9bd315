"""``benchmax capture`` as a real subprocess: a curl pipeline through it, the calls written
with token ids, the upstream key in no output."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from benchmax.testing import MockModelServer, echo

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_KEY = "sk-capture-cli-upstream-0123456789"


async def test_capture_command_serves_a_curl_pipeline(tmp_path: Path) -> None:
    calls_file = tmp_path / "calls.jsonl"
    async with MockModelServer(echo, tokens=True) as upstream:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmax.cli", "capture",
            "--upstream", upstream.base_url, "--api-key-env", "UPSTREAM_KEY",
            "--model", "policy", "--port", "0", "-o", str(calls_file),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "UPSTREAM_KEY": UPSTREAM_KEY}, cwd=ROOT,
        )  # fmt: skip
        assert process.stdout is not None
        printed: dict[str, str] = {}
        lines: list[str] = []
        async with asyncio.timeout(120):
            while "OPENAI_MODEL" not in printed:
                line = (await process.stdout.readline()).decode()
                assert line, "benchmax capture exited early"
                lines.append(line)
                if line.strip().startswith("export "):
                    name, _, value = line.strip()[len("export ") :].partition("=")
                    printed[name] = value
        program = await asyncio.create_subprocess_exec(
            "sh", str(ROOT / "examples/agents/curl_pipeline.sh"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={"PATH": os.environ["PATH"], **printed},
        )  # fmt: skip
        answer, _ = await program.communicate(json.dumps({"a": 2, "b": 3}).encode())
        assert program.returncode == 0
        assert answer.decode().strip() == "What is 2 + 3?"  # echo repeats the question
        process.send_signal(signal.SIGTERM)
        rest, errors = await process.communicate()
    assert process.returncode == 0, errors.decode()
    (line,) = [json.loads(text) for text in calls_file.read_text().splitlines()]
    assert line["session"] == "s1" and line["request"]["model"] == "policy"
    assert line["model_call"]["completion_token_ids"]
    everything = "".join(lines) + rest.decode() + errors.decode() + calls_file.read_text()
    assert UPSTREAM_KEY not in everything
    assert upstream.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


async def test_capture_command_advertises_another_host(tmp_path: Path) -> None:
    """Listening on every interface, the printed URLs name the host a container reaches
    this machine by; the endpoint warns that it is exposed."""
    async with MockModelServer(echo, tokens=True) as upstream:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmax.cli", "capture", "--upstream", upstream.base_url,
            "--host", "0.0.0.0", "--advertise-host", "host.docker.internal", "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        assert process.stdout is not None
        async with asyncio.timeout(120):
            while True:
                line = (await process.stdout.readline()).decode()
                assert line, "benchmax capture exited early"
                if "OPENAI_BASE_URL" in line:
                    break
        process.send_signal(signal.SIGTERM)
        _, errors = await process.communicate()
    assert process.returncode == 0, errors.decode()
    url = line.strip().partition("=")[2]
    assert url.startswith("http://host.docker.internal:") and url.endswith("/rollouts/s1/v1")
    assert "capture.listening_beyond_loopback" in errors.decode()


def test_capture_command_refuses_a_bad_advertised_host() -> None:
    from click.testing import CliRunner

    from benchmax.cli import cli

    result = CliRunner().invoke(
        cli,
        ["capture", "--upstream", "http://127.0.0.1:9/v1", "--advertise-host", "http://h:1"],
    )
    assert result.exit_code == 2
    assert "--advertise-host" in result.output and "without scheme, port or path" in result.output
