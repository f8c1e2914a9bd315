"""Issue 28 kind 6, runs: a password in an MCP ``url`` given with ``--env-arg`` is masked in
the results header and the HTML page; a key that user code prints (stdout, stderr, a log
record) never reaches the terminal. ``benchmax run`` and ``view`` run as real processes;
their terminal output and every file they write are scanned.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import REPO, ThreadedServer

from benchmax._secret_masking import MaskingStream, remember
from benchmax.testing import echo

POLICY_KEY = "policy-key-printed-by-user-code-0001"
MCP_PASSWORD = "mcp-Pa55w0rd-in-an-env-arg"
MCP_URL = f"https://tools:{MCP_PASSWORD}@127.0.0.1:9/mcp"

ENV_SOURCE = '''
import logging
import os
import sys
from pathlib import Path

from benchmax.envs import BaseEnv, Dataset, Example


class ChattyEnv(BaseEnv):
    """Prints and logs the key it can read, and keeps an MCP URL with a password."""

    reward_keys = ("ok",)
    max_turns = 1

    def __init__(self, mcp_url: str = "") -> None:
        super().__init__()
        self.mcp_url = mcp_url

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        prompt = [{"role": "user", "content": "hello"}]
        return Dataset([Example(id=f"e{i}", payload={"prompt_messages": prompt}) for i in range(2)])

    async def compute_reward(self, rollout):
        key = os.environ["POLICY_KEY"]
        print(f"user code sees key {key} and url {self.mcp_url}")
        print(f"stderr sees key {key}", file=sys.stderr)
        logging.getLogger("chatty").warning("logged key %s", key)
        return {"ok": 1.0}
'''


def _benchmax(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmax.cli", *args],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_run_and_view_show_no_key_and_no_url_password(tmp_path: Path) -> None:
    (tmp_path / "chatty_env.py").write_text(ENV_SOURCE)
    output = tmp_path / "runs" / "chatty.jsonl"
    with ThreadedServer(echo) as server:
        run = _benchmax(
            "run", f"{tmp_path / 'chatty_env.py'}:ChattyEnv", "--data", str(tmp_path),
            "--base-url", server.base_url, "--model", "m", "--api-key-env", "POLICY_KEY",
            "--env-arg", f"mcp_url={MCP_URL}", "-k", "2", "-o", str(output),
            env={"POLICY_KEY": POLICY_KEY},
        )  # fmt: skip
        sent = {r.headers.get("authorization") for r in server.requests}
    assert run.returncode == 0, run.stderr[-3000:]
    assert sent == {f"Bearer {POLICY_KEY}"}
    page = tmp_path / "runs" / "chatty.html"
    view = _benchmax("view", str(output), "-o", str(page), env={})
    assert view.returncode == 0, view.stderr[-3000:]

    terminal = run.stdout + run.stderr + view.stdout + view.stderr
    assert "user code sees key *** and url https://tools:***@127.0.0.1:9/mcp" in terminal
    assert "stderr sees key ***" in terminal
    written = {
        path: path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file()
    }
    assert page in written and output in written
    for secret in (POLICY_KEY, MCP_PASSWORD):
        assert secret not in terminal
        for path, text in written.items():
            if path.name != "chatty_env.py":
                assert secret not in text, path
    assert "https://tools:***@127.0.0.1:9/mcp" in written[output].splitlines()[0]


def test_the_masking_stream_masks_text_and_bytes() -> None:
    remember("masking-stream-secret-42")
    raw = io.BytesIO()
    target = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    stream = MaskingStream(target)
    print("a masking-stream-secret-42 b", file=stream)
    stream.buffer.write(b"bytes masking-stream-secret-42\n")
    stream.writelines(["lines masking-stream-secret-42\n"])
    stream.flush()
    assert raw.getvalue().decode() == "a *** b\nbytes ***\nlines ***\n"
    assert stream.encoding == "utf-8" and not stream.isatty()
