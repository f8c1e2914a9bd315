"""``benchmax run`` and ``traces`` with the credential in the base URL (issue 28 kind 7):
every rollout reaches the model with it (HTTP Basic), and no file the command writes, nor
the terminal, holds the password."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result
from tests.cli.conftest import SAMPLE_ENVS

ANSWER_ENV = f"{SAMPLE_ENVS}:AnswerEnv"
PASSWORD = "url-pass@word-5150"
WRITTEN = "url-pass%40word-5150"
BASIC = "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()


def with_credential(url: str) -> str:
    return url.replace("://", f"://bob:{WRITTEN}@", 1)


def everything_written(root: Path) -> str:
    return "".join(
        path.read_text(errors="replace") for path in sorted(root.rglob("*")) if path.is_file()
    )


def test_a_run_with_a_password_in_the_base_url_reaches_the_model(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "runs" / "out.jsonl"
    with threaded_server() as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "2",
            "--base-url", with_credential(server.base_url), "--model", "m", "-o", output,
        )  # fmt: skip
        seen = {(r.path, r.headers.get("authorization")) for r in server.requests}
    assert result.exit_code == 0, result.output
    assert seen == {("/v1/models", BASIC), ("/v1/chat/completions", BASIC)}
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert records[0]["definition"]["base_url"] == server.base_url.replace("://", "://bob:***@")
    assert [r["termination_reason"] for r in records[1:]] == ["finished"] * 4
    shown = everything_written(tmp_path / "runs") + result.output
    for secret in (PASSWORD, WRITTEN, BASIC.split()[1]):
        assert secret not in shown


def test_a_password_in_the_base_url_and_a_key_variable_are_refused_before_the_run(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "--model", "m",
        "--base-url", with_credential("http://127.0.0.1:9/v1"), "--api-key-env", "HOME",
        "-o", tmp_path / "out.jsonl",
    )  # fmt: skip
    assert result.exit_code != 0
    assert "keep the credential in one of them" in result.output
    assert PASSWORD not in result.output and WRITTEN not in result.output
    assert not (tmp_path / "out.jsonl").exists()
