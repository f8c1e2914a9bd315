"""Real inference servers for the model-path tests, each run from its own environment
under the CI cache (``.ci/real-servers`` installs them): vLLM's CPU build serving
SmolLM2-135M-Instruct converted to a Hugging Face directory, and llama-cpp-python's server
serving the GGUF file itself. Both listen on 127.0.0.1 only and are stopped (their own
process group) when the ``with`` block ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from tests.real_servers._models import ci_cache, smollm2_directory, smollm2_gguf

from benchmax.training import BUILTIN_MODELS

__all__ = [
    "MODEL",
    "TOOLS_TEMPLATE",
    "RunningServer",
    "ServerSetupMissing",
    "llamacpp_python",
    "running_llamacpp",
    "running_vllm",
    "vllm_python",
]

HERE = Path(__file__).resolve().parent
TOOLS_TEMPLATE = BUILTIN_MODELS["smollm2-135m-instruct"].chat_template_path
"""SmolLM2's Hermes-style tool template, the one ``benchmax train`` loads it with."""
MODEL = "smollm2"
"""The name both servers serve the model under."""
MAX_MODEL_LEN = 2048

START_TIMEOUT_SECONDS = float(os.environ.get("BENCHMAX_SERVER_START_TIMEOUT", "2700"))
# vLLM is ready in about 3.5 min on an idle 2-core machine, 11-32 min beside other builds.
_STOP_GRACE_SECONDS = 60.0
_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "NO_PROXY": "127.0.0.1,localhost",
}


class ServerSetupMissing(Exception):
    """The environment a server runs from is not installed; the message names the command."""


@dataclass(frozen=True)
class RunningServer:
    """A live server: its OpenAI base URL (``.../v1``), root URL, model name, log file and
    how long it took to become ready."""

    base_url: str
    root: str
    model: str
    log: Path
    start_seconds: float


def vllm_python() -> Path:
    """The vLLM environment's Python; ``ServerSetupMissing`` when it is not installed."""
    return _server_python("vllm")


def llamacpp_python() -> Path:
    """The llama-cpp-python environment's Python; ``ServerSetupMissing`` when missing."""
    return _server_python("llamacpp")


def _server_python(name: str) -> Path:
    python = ci_cache() / name / "bin" / "python"
    if not python.is_file():
        raise ServerSetupMissing(
            f"{name} is not installed in {python.parent.parent}: run `bash .ci/real-servers {name}`"
        )
    return python


@contextmanager
def running_vllm(python: Path | None = None) -> Iterator[RunningServer]:
    """vLLM's OpenAI server (the CPU build) serving SmolLM2 as :data:`MODEL`, with the
    Hermes-style tools template and the hermes tool-call parser."""
    python = python or vllm_python()
    directory = smollm2_directory(python)
    port = _free_port()
    command = [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(directory), "--served-model-name", MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--max-model-len", str(MAX_MODEL_LEN),
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--chat-template", str(TOOLS_TEMPLATE),
        # Without it the CPU build reserves 92% of the machine's memory for its KV cache
        # and refuses to start when less is free (0.5 GiB holds 23,000 tokens here).
        "--kv-cache-memory-bytes", str(512 * 1024 * 1024),
    ]  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    with _process(command, "vllm", f"{root}/health") as (log, seconds):
        yield RunningServer(f"{root}/v1", root, MODEL, log, seconds)


@contextmanager
def running_llamacpp(python: Path | None = None) -> Iterator[RunningServer]:
    """llama-cpp-python's server serving the SmolLM2 GGUF file as :data:`MODEL`, with its
    ``chatml-function-calling`` chat format (tools and named tool choice)."""
    python = python or llamacpp_python()
    port = _free_port()
    command = [
        str(python), "-m", "llama_cpp.server",
        "--model", str(smollm2_gguf(python)), "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(MAX_MODEL_LEN), "--n_threads", "1",
        "--chat_format", "chatml-function-calling",
    ]  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    with _process(command, "llamacpp", f"{root}/v1/models") as (log, seconds):
        yield RunningServer(f"{root}/v1", root, MODEL, log, seconds)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _process(command: Sequence[str], name: str, ready_url: str) -> Iterator[tuple[Path, float]]:
    """Start ``command`` in its own process group, wait until ``ready_url`` answers 200
    (``RuntimeError`` with the log's tail when it exits or the deadline passes), and stop
    the group afterwards."""
    logs = ci_cache() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}-{os.getpid()}.log"
    started = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **_OFFLINE},
            start_new_session=True,
        )
    try:
        _wait_until_ready(process, ready_url, log, name)
        yield log, time.monotonic() - started
    finally:
        _stop(process)


def _wait_until_ready(process: subprocess.Popen[bytes], url: str, log: Path, name: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{_tail(log)}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"{name} not ready after {START_TIMEOUT_SECONDS:.0f} s:\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=_STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
