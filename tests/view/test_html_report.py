"""The report's embedded data and static HTML, without a browser."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.view.synthetic import header, rollout, write

from benchmax.cli import cli
from benchmax.results import read_results, render_html_report, report_data, write_html_report

DATA = re.compile(r'<script type="application/json" id="benchmax-data">(.*?)</script>', re.S)


def embedded(page: str) -> dict:
    match = DATA.search(page)
    assert match is not None
    return json.loads(match.group(1))


def test_the_summary_equals_the_runs_report_json(example_runs: dict[str, Path]) -> None:
    for name, results in example_runs.items():
        summary = json.loads(results.with_name(results.stem + ".report.json").read_text())
        data = report_data(read_results(results))
        for field in (
            "groups",
            "rollouts",
            "rollouts_by_reason",
            "groups_by_reason",
            "reward_stats",
            "no_variance_group_share",
        ):
            assert data["summary"][field] == summary[field], (name, field)


def test_groups_store_the_shared_prompt_once(example_runs: dict[str, Path]) -> None:
    results = read_results(example_runs["calculator"])
    data = report_data(results)
    assert data["keys"] == ["correct", "used_tools"]
    first = data["groups"][0]
    records = [r for r in results.rollouts if r.example_index == 0]
    assert [m["role"] for m in first["p"]] == ["system", "user"]
    for compact, record in zip(first["r"], records, strict=True):
        assert first["p"] + compact["m"] == list(record.messages or ())
        assert compact["w"] == [record.rewards["correct"], record.rewards["used_tools"]]
        assert data["reasons"][compact["t"]] == record.termination_reason


def test_embedded_json_cannot_end_the_script_element(tmp_path: Path) -> None:
    text = "</script><script>alert(1)</script><!-- a\u2028b\u2029c & d > e"
    transcript = [{"role": "user", "content": text}]
    records = [rollout(0, "e", 0, rewards={"ok": 1.0}, transcript=transcript)]
    page = render_html_report(
        read_results(write(tmp_path / "j.jsonl", header(group_size=1), records))
    )
    raw = DATA.search(page).group(1)  # type: ignore[union-attr]
    for forbidden in ("<", ">", "&", "\u2028", "\u2029"):
        assert forbidden not in raw
    assert json.loads(raw)["groups"][0]["p"] == transcript


def test_a_lone_surrogate_in_a_transcript_is_written_and_read_back(tmp_path: Path) -> None:
    text = "lone \ud800 and \udfff surrogates"
    transcript = [{"role": "user", "content": text}]
    head = header(group_size=1, model="m\udc80")
    path = tmp_path / "s.jsonl"
    record = rollout(0, "e", 0, rewards={"ok": 1.0}, transcript=transcript)
    path.write_text(json.dumps(head) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    report = write_html_report(path, tmp_path / "s.html")
    page = report.path.read_text(encoding="utf-8")
    assert json.loads(DATA.search(page).group(1))["groups"][0]["p"] == transcript  # type: ignore[union-attr]
    assert embedded(render_html_report(read_results(path)))["header"]["definition"]["model"] == (
        "m\udc80"
    )


def test_untrusted_text_is_escaped_in_the_static_html(tmp_path: Path) -> None:
    hostile = "<script>alert('x')</script>{{DATA}}{{STATIC}}"
    head = header(model=hostile, group_size=1)
    transcript = [{"role": "user", "content": hostile}, {"role": "assistant", "content": "ok"}]
    records = [
        rollout(0, hostile, 0, rewards={hostile: 1.0}, reason=hostile, transcript=transcript)
    ]
    page = render_html_report(read_results(write(tmp_path / "h.jsonl", head, records)))
    assert page.count("<script") == 2
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;{{DATA}}{{STATIC}}" in page
    data = embedded(page)
    assert data["header"]["definition"]["model"] == hostile
    assert data["groups"][0]["r"][0]["m"] == [{"role": "assistant", "content": "ok"}]


def test_an_interrupted_file_shows_its_complete_groups(tmp_path: Path) -> None:
    records = [
        *(rollout(0, "a", k, rewards={"ok": 1.0}) for k in range(2)),
        rollout(1, "b", 0, rewards={"ok": 0.0}),  # its sibling never arrived
        *(rollout(2, "c", k, rewards={"ok": 0.0}) for k in range(2)),
    ]
    path = write(tmp_path / "cut.jsonl", header(group_size=2), records)
    with path.open("a") as handle:
        handle.write('{"type": "rollout", "example_index": 3, "torn')
    report = write_html_report(path)
    assert report.path == tmp_path / "cut.html"
    assert (report.groups, report.rollouts) == (2, 4)
    data = embedded(report.path.read_text())
    assert [g["id"] for g in data["groups"]] == ["a", "c"]
    assert data["summary"]["examples"] == 2


def test_token_usage_is_summed_and_older_files_have_none(tmp_path: Path) -> None:
    usages = [
        {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27, "reasoning_tokens": 3},
        None,
    ]
    records = [rollout(0, "e", k, rewards={"ok": 1.0}, usage=u) for k, u in enumerate(usages)]
    path = write(tmp_path / "u.jsonl", header(group_size=3), records)
    usage = report_data(read_results(path))["summary"]["usage"]
    assert usage == {
        "rollouts_with_usage": 2,
        "totals": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42,
                   "reasoning_tokens": 3},
        "mean_per_rollout": {"prompt_tokens": 15.0, "completion_tokens": 6.0,
                             "total_tokens": 21.0, "reasoning_tokens": 1.5},
    }  # fmt: skip
    old = [rollout(0, "e", k, rewards={"ok": 1.0}, with_usage=False) for k in range(3)]
    path = write(tmp_path / "old.jsonl", header(group_size=3), old)
    assert report_data(read_results(path))["summary"]["usage"] is None
    assert 'data-testid="usage-none"' in render_html_report(read_results(path))


def test_pass_at_k_only_for_binary_keys(tmp_path: Path) -> None:
    records = [
        rollout(i, f"e{i}", k, rewards={"binary": float(i == k), "graded": 0.5})
        for i in range(2)
        for k in range(2)
    ]
    path = write(tmp_path / "p.jsonl", header(group_size=2), records)
    summary = report_data(read_results(path))["summary"]
    assert summary["pass_at_k"] == {
        "binary": {"k": 2, "pass_at_1": 0.5, "pass_at_k": 1.0, "any_success_share": 1.0}
    }
    assert summary["no_variance_groups"] == 0


def test_the_view_command_prints_size_and_time(
    example_runs: dict[str, Path], tmp_path: Path
) -> None:
    output = tmp_path / "nested" / "report.html"
    result = CliRunner().invoke(cli, ["view", str(example_runs["exact_match"]), "-o", str(output)])
    assert result.exit_code == 0, result.output
    expected = rf"wrote {re.escape(str(output))} \(\d+\.\d KB, \d+ groups, \d+ rollouts\)"
    assert re.fullmatch(expected + r" in \d+\.\d\d s\n", result.output)
    assert output.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("groups", [0])
def test_a_file_with_no_complete_group_still_renders(tmp_path: Path, groups: int) -> None:
    path = write(tmp_path / "empty.jsonl", header(group_size=2), [])
    page = render_html_report(read_results(path))
    assert embedded(page)["groups"] == []


def test_view_open_hands_the_file_to_the_web_browser(
    example_runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    output = tmp_path / "r.html"
    result = CliRunner().invoke(
        cli, ["view", str(example_runs["quickstart"]), "-o", str(output), "--open"]
    )
    assert result.exit_code == 0, result.output
    assert opened == [output.resolve().as_uri()]


def test_bidirectional_overrides_are_embedded_as_visible_escapes() -> None:
    # "Trojan Source": a raw U+202E would reverse the text after it on the page.
    from benchmax.results._page_data import embedded_json

    text = embedded_json({"content": "pay \u202egnirts\u2066 x\u200f</script>"})
    assert not any(ch in text for ch in "\u202e\u2066\u200f")
    assert json.loads(text)["content"] == "pay \\u202egnirts\\u2066 x\\u200f</script>"
