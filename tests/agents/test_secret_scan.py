"""The upstream key in no file, log or page: ``benchmax run`` of an agent example against a
keyed server, then ``benchmax view``, scanned end to end."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from examples.agents.policy import policy

from benchmax.testing import MockModelServer

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_KEY = "sk-scan-upstream-key-0123456789abcdef"


async def _cli(*arguments: str, cwd: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmax.cli", *arguments,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "SCAN_KEY": UPSTREAM_KEY}, cwd=cwd,
    )  # fmt: skip
    async with asyncio.timeout(300):
        output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    return output.decode()


async def test_upstream_key_in_no_file_log_or_page(tmp_path: Path) -> None:
    results = tmp_path / "run.jsonl"
    async with MockModelServer(policy, tokens=True) as upstream:
        printed = await _cli(
            "run", str(ROOT / "examples/agents/env.py:ToolLoopAgent"),
            "--base-url", upstream.base_url, "--model", "mock-model",
            "--api-key-env", "SCAN_KEY", "--max-examples", "2", "--group-size", "2",
            "-o", str(results),
            cwd=tmp_path,
        )  # fmt: skip
    assert all(r.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in upstream.requests)
    printed += await _cli(
        "view", str(results), "--tokens", "-o", str(tmp_path / "page.html"), cwd=tmp_path
    )
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert results in files and tmp_path / "page.html" in files
    for path in files:
        assert UPSTREAM_KEY not in path.read_text(errors="replace"), path
    assert UPSTREAM_KEY not in printed
    assert '"coverage"' in results.read_text()
