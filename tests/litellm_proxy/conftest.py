"""A LiteLLM proxy on 127.0.0.1, started once per module, whose models need no upstream.

The proxy is a real third-party OpenAI-compatible server (``litellm[proxy]``): ``benchmax run``
talks to it exactly as it would to a gateway in front of vLLM or a hosted API. Its models
answer offline: ``mock_response`` text, ``mock_tool_calls``, mock errors, and the scripted
custom provider in ``scripted_handler.py`` (reasoning and content parts).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
START_TIMEOUT_SECONDS = 240.0

MODELS = """\
model_list:
  - model_name: mock-text
    litellm_params:
      model: openai/mock-text
      api_key: unused
      mock_response: "Hamlet was written by <answer>Shakespeare</answer>."
  - model_name: mock-tools
    litellm_params:
      model: openai/mock-tools
      api_key: unused
      mock_response: ""
      mock_tool_calls:
        - id: call_add
          type: function
          function: {name: add, arguments: '{"a": 1, "b": 2}'}
  - model_name: mock-rate-limited
    litellm_params:
      model: openai/mock-rate-limited
      api_key: unused
      mock_response: litellm.RateLimitError
  - model_name: mock-context-window
    litellm_params:
      model: openai/mock-context-window
      api_key: unused
      mock_response: litellm.ContextWindowExceededError
  - model_name: scripted-think
    litellm_params: {model: scripted/think}
  - model_name: scripted-template
    litellm_params: {model: scripted/template}
  - model_name: scripted-parts
    litellm_params: {model: scripted/parts}
  - model_name: scripted-cutoff
    litellm_params: {model: scripted/cutoff}
  - model_name: scripted-calc
    litellm_params: {model: scripted/calc}
  - model_name: scripted-calc-strict
    litellm_params: {model: scripted/calc-strict}
litellm_settings:
  num_retries: 0
  request_timeout: 30
  telemetry: false
  custom_provider_map:
    - provider: scripted
      custom_handler: scripted_handler.handler
router_settings:
  num_retries: 0
general_settings:
  master_key: {master_key}
"""


@dataclass(frozen=True)
class LiteLLMProxy:
    """A running proxy: its OpenAI base URL, the key it wants, and how long it took to start."""

    base_url: str
    master_key: str
    start_seconds: float
    log: Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_live(process: subprocess.Popen[bytes], root: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"LiteLLM proxy exited with {process.returncode}:\n{_tail(log)}")
        try:
            if httpx.get(f"{root}/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"LiteLLM proxy not live after {START_TIMEOUT_SECONDS:.0f} s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-40:])


@pytest.fixture(scope="module")
def litellm_proxy(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiteLLMProxy]:
    """Start ``litellm --config ...`` on a free port; stop it (this process only) afterwards."""
    # Looked up, not imported: importing litellm here, without the offline cost map, would
    # make it try to download the cost map in this process.
    for module in ("litellm", "fastapi", "uvicorn", "apscheduler"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs litellm[proxy] ({module} is not installed)")
    directory = tmp_path_factory.mktemp("litellm")
    shutil.copy(HERE / "scripted_handler.py", directory / "scripted_handler.py")
    master_key = "sk-" + secrets.token_hex(24)
    config = directory / "config.yaml"
    config.write_text(MODELS.replace("{master_key}", master_key))
    port = _free_port()
    root = f"http://127.0.0.1:{port}"
    log = directory / "proxy.log"
    environment = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    environment.pop("DATABASE_URL", None)
    command = [
        sys.executable, "-c", "import sys; from litellm import run_server; sys.exit(run_server())",
        "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1",
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=directory, env=environment, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        _wait_until_live(process, root, log)
        seconds = time.monotonic() - started
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\nLiteLLM proxy live after {seconds:.1f} s (log: {log})")
        yield LiteLLMProxy(f"{root}/v1", master_key, seconds, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
