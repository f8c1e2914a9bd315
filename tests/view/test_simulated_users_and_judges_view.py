"""``show`` and ``view`` mark simulated-user turns and show the judge's explanations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from tests.view.synthetic import header, rollout, write

from benchmax.cli import cli

TRANSCRIPT = [
    {"role": "user", "content": "My order has not arrived."},
    {"role": "assistant", "content": "Which order?"},
    {"role": "user", "content": "Order A17.", "simulated_user": True},
    {"role": "assistant", "content": "A refund is on its way."},
]
JUDGE = {
    "rubric_grounded": {
        "title": "Grounded",
        "score": 1.0,
        "reward": 1.0,
        "reasoning": "the refund follows the lookup",
        "remarks": "Checked the tool result first.",
    },
    "rubric_rude": {"title": "Rude", "reward": 0.0, "skipped": "empty final reply"},
}


def results(tmp_path: Path) -> Path:
    records = []
    for k in range(2):
        record = rollout(0, "chat0001", k, rewards={"rubric_grounded": 1.0}, transcript=TRANSCRIPT)
        record["annotations"] = {"judge": JUDGE, "note": {"tickets": [1, 2]}}
        records.append(record)
    return write(tmp_path / "chat.jsonl", header(group_size=2), records)


def invoke(*args: object) -> Any:
    result = CliRunner().invoke(cli, [str(arg) for arg in args], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    return result


def test_show_marks_simulated_users_and_prints_explanations(tmp_path: Path) -> None:
    output = invoke("show", results(tmp_path), "--limit", "1").output
    assert output.count("user (simulated)") == 1
    assert "annotation judge" in output
    assert re.search(r"Grounded rubric_grounded · score 1 · reward 1", output)
    assert "reasoning: the refund follows the lookup" in output
    assert "remarks: Checked the tool result first." in output
    assert "Rude rubric_rude · reward 0 · empty final reply" in output
    assert "annotation note" in output and '"tickets"' in output


def test_view_embeds_annotations_and_the_marker(tmp_path: Path) -> None:
    html = tmp_path / "chat.html"
    invoke("view", results(tmp_path), "-o", html)
    text = html.read_text()
    assert '"an":' in text and "the refund follows the lookup" in text
    assert '"simulated_user":true' in text.replace(" ", "")
