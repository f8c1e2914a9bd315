"""``view`` with exact tokens: per assistant turn its token count and mean logprob, and
with ``--tokens`` the ids and logprobs themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.view.conftest import invoke
from tests.view.synthetic import header, rollout, write

from benchmax.results import read_results
from benchmax.results._html_report import report_data

TRANSCRIPT = [
    {"role": "user", "content": "6*7?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "multiply", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "assistant", "content": "42"},
]  # fmt: skip
CALLS = [
    {"finish_reason": "tool_calls", "usage": None, "seconds": 0.1, "message_index": 1,
     "prompt_token_ids": [1, 2], "completion_token_ids": [5, 6, 7],
     "completion_logprobs": [-0.5, -0.25, -0.75]},
    {"finish_reason": "stop", "usage": None, "seconds": 0.1, "message_index": 3,
     "prompt_token_ids_added": [8], "completion_token_ids": [9, 2],
     "completion_logprobs": [-1.0, 0.0]},
]  # fmt: skip


def _results(tmp_path: Path, calls: list[dict[str, Any]] | None = CALLS) -> Path:
    records = []
    for k in range(2):
        record = rollout(0, "ex", k, rewards={"ok": 1.0}, transcript=TRANSCRIPT)
        if calls is not None:
            record["model_calls"] = calls
        records.append(record)
    return write(tmp_path / "run.jsonl", header(group_size=2), records)


def test_turns_carry_count_and_mean_logprob(tmp_path: Path) -> None:
    data = report_data(read_results(_results(tmp_path)))
    (group,) = data["groups"]
    assert len(group["p"]) == 1  # the shared prompt: shown messages count from after it
    assert group["r"][0]["k"] == {"0": [3, -0.5], "2": [2, -0.5]}


def test_tokens_embeds_ids_and_logprobs(tmp_path: Path) -> None:
    data = report_data(read_results(_results(tmp_path)), tokens=True)
    assert data["groups"][0]["r"][1]["k"]["2"] == [2, -0.5, [9, 2], [-1.0, 0.0]]


def test_rollouts_without_tokens_have_no_turn_data(tmp_path: Path) -> None:
    data = report_data(read_results(_results(tmp_path, calls=None)))
    assert "k" not in data["groups"][0]["r"][0]


@pytest.mark.browser
def test_the_page_shows_the_tokens_per_turn(page: Any, tmp_path: Path) -> None:
    results = _results(tmp_path)
    html = tmp_path / "tokens.html"
    assert f"wrote {html}" in invoke("view", results, "-o", html, "--tokens").output
    page.goto(html.resolve().as_uri())
    page.wait_for_selector("body[data-ready=true]", timeout=120_000)
    page.click("#examples-body tr[data-example-id]")
    turns = page.locator('#detail [data-testid="turn-tokens"]')
    assert turns.count() == 4  # two assistant turns in each of two rollouts
    assert turns.first.inner_text().strip() == "3 tokens · mean logprob -0.500"
    turns.first.locator("summary").click()
    assert "5(-0.5) 6(-0.25) 7(-0.75)" in turns.first.inner_text()
    assert page.errors == []


def test_a_page_that_cannot_be_written_is_one_error_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from benchmax.cli import cli

    (tmp_path / "a-file").write_text("")
    page = tmp_path / "a-file" / "run.html"  # its directory cannot be made
    result = CliRunner().invoke(cli, ["view", str(_results(tmp_path)), "-o", str(page), "--tokens"])
    assert result.exit_code == 3
    assert result.output.startswith(f"Error: cannot write {page}: ")
    assert result.output.count("\n") == 1 and "Errno" not in result.output
