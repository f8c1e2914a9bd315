"""Issue 28 kind 6, traces: every kind of secret a production log holds is scrubbed from
the rows (env-style assignments, keys split across text parts, ``Authorization: Basic``,
PEM private keys, DSN passwords, ``?key=``/``?token=``, e-mails used as conversation ids),
and a teacher whose 401 repeats its key never shows it: every file written and everything
``benchmax traces`` printed (a real process, its terminal output captured) are scanned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli.conftest import REPO, ThreadedServer

from benchmax.datagen import TracesConfig, traces
from benchmax.datagen._scrubbing import Scrubber
from benchmax.testing import Fault, RecordedRequest

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)
SECRETS = {
    "DB_PASSWORD=": ("DB_PASSWORD=Tr0ub4dor-db-pass", "Tr0ub4dor-db-pass"),
    "PGPASSWORD=": ("export PGPASSWORD=pg-s3cret-value", "pg-s3cret-value"),
    "client_secret=": ("client_secret=cs-9f8e7d6c5b4a", "cs-9f8e7d6c5b4a"),
    "AWS_SECRET_ACCESS_KEY=": (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYzzSECRET",
        "wJalrXUtnFEMIK7MDENGbPxRfiCYzzSECRET",
    ),
    "Authorization: Basic": ("Authorization: Basic dXNlcjpodW50ZXIyMjI=", "dXNlcjpodW50ZXIyMjI="),
    "PEM": (PEM, "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"),
    "DSN": ("postgres://app:dsn-Pa55word@db.internal:5432/app", "dsn-Pa55word"),
    "?key=": ("GET https://maps.example.com/v1?key=mk-0011223344&q=oslo", "mk-0011223344"),
    "?token=": ("https://files.example.com/a.pdf?token=tk-5566778899", "tk-5566778899"),
    "bearer": ("Authorization: Bearer abcdef0123456789xyz", "abcdef0123456789xyz"),
}
SPLIT_KEY = "sk-proj-splitacrosstwoparts0123456789"
EMAILS = ("ann.lee@example.com", "bob.stone@example.org")
TEACHER_KEY = "teacher-key-that-must-never-show-1234"


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_kind_is_scrubbed(name: str) -> None:
    text, secret = SECRETS[name]
    scrubbed = Scrubber().text(f"note: {text} end")
    assert secret not in scrubbed, scrubbed
    assert scrubbed.endswith(" end")


def test_ordinary_assignments_stay() -> None:
    text = "max_tokens=100000 total_tokens=123456 the secret: is out, password: reset"
    assert Scrubber().text(text) == text


def test_a_key_split_across_two_text_parts_is_found() -> None:
    scrubber = Scrubber()
    parts = [
        {"type": "text", "text": f"my key is {SPLIT_KEY[:12]}"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "text", "text": SPLIT_KEY[12:] + " thanks"},
    ]
    scrubbed = scrubber.value({"role": "user", "content": parts})["content"]
    assert scrubbed == [
        {"type": "text", "text": "my key is [API_KEY] thanks"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]
    assert scrubber.counts["api_key"] == 1
    untouched = [{"type": "text", "text": "a"}, {"type": "text", "text": "b c d e f"}]
    assert scrubber.value(untouched) == untouched  # nothing found: parts kept as they are


def _log_lines() -> list[dict[str, Any]]:
    lines = []
    for index, (text, _secret) in enumerate(SECRETS.values()):
        lines.append(
            {
                "request": {
                    "model": "prod-model",
                    "messages": [{"role": "user", "content": f"question {index}: {text}"}],
                },
                "response": {
                    "choices": [{"message": {"role": "assistant", "content": f"noted {index}"}}]
                },
                "conversation_id": EMAILS[index % 2],
                "user": EMAILS[index % 2],
            }
        )
    parts = [
        {"type": "text", "text": f"split {SPLIT_KEY[:10]}"},
        {"type": "text", "text": SPLIT_KEY[10:]},
    ]
    lines.append(
        {
            "request": {"model": "prod-model", "messages": [{"role": "user", "content": parts}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": "ok split"}}]},
            "conversation_id": "plain-conversation-7",
        }
    )
    return lines


def _all_secrets() -> list[str]:
    return [secret for _text, secret in SECRETS.values()] + [SPLIT_KEY[10:], *EMAILS]


def _written(directory: Path) -> str:
    return "\n".join(
        path.read_text(errors="replace") for path in sorted(directory.rglob("*")) if path.is_file()
    )


async def test_rows_hold_no_secret_and_conversations_keep_their_pseudonyms(
    tmp_path: Path,
) -> None:
    log = tmp_path / "gateway.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in _log_lines()))
    out = tmp_path / "out"
    summary = await traces([log], out, TracesConfig(dedupe=None, eval_fraction=0.3, seed=3))
    written = _written(out)
    for secret in _all_secrets():
        assert secret not in written, secret
    rows = [
        json.loads(line) for name in ("train", "eval") for line in (out / f"{name}.jsonl").open()
    ]
    assert len(rows) == len(SECRETS) + 1
    ids = {row["source"]["conversation_id"] for row in rows}
    assert ids == {"[EMAIL]#1", "[EMAIL]#2", "plain-conversation-7"}
    users = {row["source"].get("user") for row in rows}
    assert users == {"[EMAIL]#1", "[EMAIL]#2", None}
    # A conversation (and a user's conversations) never crosses the split.
    sides = {}
    for name in ("train", "eval"):
        for line in (out / f"{name}.jsonl").open():
            sides.setdefault(json.loads(line)["source"]["conversation_id"], set()).add(name)
    assert all(len(side) == 1 for side in sides.values())
    assert summary.scrubbed["api_key"] >= 8 and summary.scrubbed["bearer_token"] >= 2


def test_a_teachers_401_repeating_its_key_shows_it_nowhere(tmp_path: Path) -> None:
    def refuse(body: dict[str, Any], recorded: RecordedRequest) -> Any:
        sent = recorded.headers.get("authorization", "")
        raise Fault.status(401, message=f"Incorrect API key provided: {sent.split()[-1]}")

    log = tmp_path / "logs" / "gateway.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps(line) + "\n" for line in _log_lines()[:3]))
    out = tmp_path / "out"
    with ThreadedServer(refuse) as server:
        command = [
            sys.executable, "-m", "benchmax.cli", "traces", str(log.parent), "-o", str(out),
            "--teacher-model", "teacher", "--teacher-base-url", server.base_url,
            "--teacher-api-key-env", "TEACHER_KEY",
        ]  # fmt: skip
        finished = subprocess.run(
            command,
            cwd=REPO,
            env={**os.environ, "TEACHER_KEY": TEACHER_KEY},
            capture_output=True,
            text=True,
            timeout=300,
        )
        sent = {r.headers.get("authorization") for r in server.requests}
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert sent == {f"Bearer {TEACHER_KEY}"}  # the teacher was asked, with the key
    assert "401" in finished.stderr  # the failure is told ...
    terminal = finished.stdout + finished.stderr
    assert TEACHER_KEY not in terminal  # ... without the key ...
    assert "Traceback" not in terminal  # ... and in one line
    told = [line for line in finished.stderr.splitlines() if "401" in line]
    assert len(told) == 1 and told[0].startswith("teacher failed on 3 of 3 requests"), told
    assert "Incorrect API key provided: ***" in told[0]
    assert TEACHER_KEY not in _written(out)
    for secret in _all_secrets():
        assert secret not in terminal + _written(out)
