"""Token coverage in ``benchmax run``'s report, the results lines, ``.report.json`` and
``benchmax view``: rollouts whose reasoning is not sent back begin a second branch, and
every sampled token is still in a training sample."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result
from tests.cli.conftest import REPO

CALCULATOR = REPO / "examples" / "calculator"


def think_then_answer(body: dict[str, Any]) -> Any:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {
            "reasoning_content": "add them",
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
        }
    return "<answer>3</answer>"


def test_run_reports_coverage_and_view_shows_it(
    invoke: Callable[..., Result], tmp_path: Path, threaded_server: Any
) -> None:
    output = tmp_path / "out.jsonl"
    with threaded_server(think_then_answer, tokens=True) as server:
        result = invoke(
            "run", f"{CALCULATOR}/env.py:CalculatorEnv", "--data", CALCULATOR,
            "--base-url", server.base_url, "--model", "m", "--tokens", "-n", "1", "-k", "2",
            "-o", output,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in output.read_text().splitlines()][1:]
    sampled = 0
    for record in records:
        coverage = record["coverage"]
        tokens = sum(len(c["completion_token_ids"]) for c in record["model_calls"])
        assert coverage["sampled_tokens"] == coverage["trained_tokens"] == tokens
        assert [b["began"] for b in coverage["branches"]] == ["first", "history_rewritten"]
        assert [b["calls"] for b in coverage["branches"]] == [1, 1]
        sampled += tokens
    text = " ".join(result.output.split())
    assert (
        f"token coverage: 100.0% of {sampled:,} sampled tokens in training samples "
        "(2 rollouts recorded token ids; 2 had several branches (history_rewritten 2))"
    ) in text
    report = json.loads(output.with_name("out.report.json").read_text())
    assert report["coverage"] == {
        "rollouts": 2,
        "branched_rollouts": 2,
        "sampled_tokens": sampled,
        "trained_tokens": sampled,
        "branches_began": {"first": 2, "history_rewritten": 2},
    }
    page = tmp_path / "page.html"
    invoke("view", output, "-o", page)
    html = page.read_text()
    tile = re.search(r'data-testid="token-coverage" data-value="([^"]+)">([^<]+)<', html)
    assert tile is not None and float(tile.group(1)) == 1.0 and tile.group(2) == "100.0%"
    assert f"of {sampled:,} sampled tokens in training samples" in html
    assert '"cv":{"sampled_tokens"' in html.replace(" ", "")  # each rollout's coverage


def test_a_run_without_tokens_states_no_coverage(
    invoke: Callable[..., Result], tmp_path: Path, threaded_server: Any
) -> None:
    output = tmp_path / "out.jsonl"
    with threaded_server(think_then_answer) as server:
        result = invoke(
            "run", f"{CALCULATOR}/env.py:CalculatorEnv", "--data", CALCULATOR,
            "--base-url", server.base_url, "--model", "m", "-n", "1", "-k", "1", "-o", output,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "token coverage" not in result.output
    (record,) = [json.loads(line) for line in output.read_text().splitlines()][1:]
    assert "coverage" not in record
    report = json.loads(output.with_name("out.report.json").read_text())
    assert report["coverage"] is None
