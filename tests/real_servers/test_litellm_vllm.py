"""LiteLLM's proxy in front of the real vLLM: a run goes through it, and ``--tokens`` either
records the ids vLLM sent or is refused before the run in one line."""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.litellm_proxy.conftest import _free_port, _tail, _wait_until_live
from tests.real_servers._recording import RecordingProxy
from tests.real_servers._servers import RunningServer
from tests.real_servers.support import (
    QUICKSTART,
    assert_same_tokens,
    benchmax_run,
    one_line_error,
    raw_tokens,
    recorded_tokens,
    trajectories,
)

pytestmark = pytest.mark.vllm

CONFIG = """\
model_list:
  - model_name: smollm2-via-litellm
    litellm_params:
      model: hosted_vllm/{model}
      api_base: {api_base}
      api_key: unused
litellm_settings:
  num_retries: 0
  request_timeout: 1800
  telemetry: false
general_settings:
  master_key: {master_key}
"""


@pytest.fixture(scope="module")
def upstream(vllm: RunningServer) -> Iterator[RecordingProxy]:
    """What LiteLLM sends to vLLM, recorded."""
    with RecordingProxy(vllm.root) as recording:
        yield recording


@pytest.fixture(scope="module")
def litellm(
    vllm: RunningServer, upstream: RecordingProxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """A LiteLLM proxy routing ``smollm2-via-litellm`` to vLLM; yields (base URL, key)."""
    for module in ("litellm", "fastapi", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"needs litellm[proxy] ({module} is not installed): uv sync")
    directory = tmp_path_factory.mktemp("litellm-vllm")
    key = "sk-" + secrets.token_hex(16)
    config = directory / "config.yaml"
    config.write_text(CONFIG.format(model=vllm.model, api_base=upstream.base_url, master_key=key))
    port = _free_port()
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
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=directory, env=environment, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        _wait_until_live(process, f"http://127.0.0.1:{port}", log)
        yield f"http://127.0.0.1:{port}/v1", key
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -15):
            print(_tail(log))


def test_a_run_through_litellm_reaches_vllm(
    litellm: tuple[str, str], upstream: RecordingProxy, tmp_path: Path
) -> None:
    base_url, key = litellm
    output = tmp_path / "through.jsonl"
    started = len(upstream.chat())
    done = benchmax_run(
        base_url, "smollm2-via-litellm", *QUICKSTART, "--split", "train", "-n", 2, "-k", 2,
        "--temperature", 0.7, "--max-tokens", 24, "--api-key-env", "LITELLM_KEY", "-o", output,
        env={"LITELLM_KEY": key},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert {t.termination_reason for t in trajectories(output)} <= {"finished", "output_exceeded"}
    assert len(upstream.chat()) - started == 4
    assert all(t.usage and t.usage.get("completion_tokens") for t in trajectories(output))


def test_tokens_through_litellm_are_passed_through_or_refused_in_one_line(
    litellm: tuple[str, str], upstream: RecordingProxy, tmp_path: Path
) -> None:
    """Whatever LiteLLM does with vLLM's token fields, benchmax never records a rollout with
    tokens silently missing: the ids it records are vLLM's own, or the tokens preflight
    stops the run before it starts with one line."""
    base_url, key = litellm
    output = tmp_path / "tokens.jsonl"
    started = len(upstream.chat())
    done = benchmax_run(
        base_url, "smollm2-via-litellm", *QUICKSTART, "--split", "train", "-n", 1, "-k", 2,
        "--tokens", "--max-tokens", 24, "--api-key-env", "LITELLM_KEY", "-o", output,
        env={"LITELLM_KEY": key},
    )  # fmt: skip
    sent = upstream.chat()[started:]
    assert sent and sent[0].body.get("return_token_ids") is True, [e.body for e in sent]
    if done.returncode != 0:
        line = one_line_error(done)
        assert "tokens preflight:" in line and "cannot return exact tokens" in line
        assert len(sent) == 1 and not output.exists()
        assert "prompt_token_ids" in sent[0].reply  # vLLM sent them; LiteLLM dropped them
        return
    raw = [raw_tokens(e.reply) for e in sent[1:]]
    recorded = [recorded_tokens(c) for t in trajectories(output) for c in t.model_calls]
    assert_same_tokens(recorded, raw)
