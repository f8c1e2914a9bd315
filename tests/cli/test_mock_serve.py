"""``benchmax mock-serve``: the mock model server on its own, stopped with Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

import httpx
from click.testing import Result
from tests.cli.conftest import REPO, interruptible


def test_mock_serve_answers_until_interrupted() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "mock-serve", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("mock model server listening on http://127.0.0.1:"), line
        assert "(policy echo)" in line
        base_url = line.split()[5]
        response = httpx.post(
            f"{base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hello there"}]},
            timeout=60,
        )
        assert response.json()["choices"][0]["message"]["content"] == "hello there"
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0


def test_mock_serve_rejects_a_bad_policy(invoke: Callable[..., Result]) -> None:
    result = invoke("mock-serve", "--mock-policy", "no_such_module_xyz:policy")
    assert result.exit_code != 0
    assert result.output.startswith("Error: ") and len(result.output.strip().splitlines()) == 1


def test_a_chat_template_without_token_mode_is_refused(invoke: Callable[..., Result]) -> None:
    result = invoke("mock-serve", "--port", "0", "--chat-template", "qwen3")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: --chat-template is the token mode's template: add --tokens "
        "(see 'cli mock-serve --help')"
    )
