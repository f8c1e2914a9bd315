"""The HTML report opened in headless Chromium: numbers, filters, transcripts, escaping, scale."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.view.conftest import ARTIFACTS, BROWSER_PATIENCE_MS, EXAMPLE_RUNS, REPO, invoke
from tests.view.synthetic import header, large_run, rollout, write

from benchmax.results import read_results

pytestmark = pytest.mark.browser


def open_report(page: Any, html: Path) -> None:
    page.goto(html.resolve().as_uri())
    page.wait_for_selector("body[data-ready=true]", timeout=120_000)


def value(page: Any, testid: str) -> str:
    return page.get_attribute(f'[data-testid="{testid}"]', "data-value")


def shown_ids(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#examples-body tr[data-example-id]", "rows => rows.map(r => r.dataset.exampleId)"
    )


def shown_count(page: Any) -> int:
    return int(page.get_attribute("#match-count", "data-count"))


def assert_clean(page: Any) -> None:
    """No script error, and nothing fetched beyond the file itself."""
    assert page.errors == []
    assert all(url.startswith("file://") for url in page.requests), page.requests


def view(results: Path, html: Path) -> Path:
    output = invoke("view", results, "-o", html).output
    assert f"wrote {html}" in output
    return html


@pytest.mark.parametrize("name", list(EXAMPLE_RUNS))
def test_the_summary_matches_the_report_json(
    name: str, example_runs: dict[str, Path], page: Any, tmp_path: Path
) -> None:
    results = example_runs[name]
    summary = json.loads(results.with_name(results.stem + ".report.json").read_text())
    open_report(page, view(results, tmp_path / f"{name}.html"))
    assert int(value(page, "rollouts")) == summary["rollouts"]
    assert int(value(page, "examples")) == summary["groups"]
    assert float(value(page, "no-variance")) == summary["no_variance_group_share"]
    for reason, count in summary["rollouts_by_reason"].items():
        assert int(value(page, f"rollouts-{reason}")) == count
        assert int(value(page, f"groups-{reason}")) == summary["groups_by_reason"][reason]
    assert page.locator('[data-testid="reasons"] tbody tr').count() == len(
        summary["rollouts_by_reason"]
    )
    for key, stats in summary["reward_stats"].items():
        for stat in ("mean", "std", "min", "max"):
            assert float(value(page, f"{stat}-{key}")) == stats[stat], (key, stat)
        shown = page.inner_text(f'[data-testid="mean-{key}"]')
        assert shown == f"{stats['mean']:.3f}"
        assert page.locator(f'svg[data-testid="histogram-{key}"] rect').count() >= 1
        assert page.locator(f'svg[data-testid="by-reason-{key}"] rect').count() == len(
            summary["rollouts_by_reason"]
        )
    assert shown_count(page) == summary["groups"]
    assert len(shown_ids(page)) == min(50, summary["groups"])
    page.screenshot(path=str(ARTIFACTS / f"view-{name}.png"), full_page=True)
    assert_clean(page)


def test_filtering_by_a_termination_reason_shows_exactly_those_groups(
    example_runs: dict[str, Path], page: Any, tmp_path: Path
) -> None:
    results = example_runs["calculator"]
    rollouts = read_results(results).rollouts
    expected = list(
        dict.fromkeys(
            r.example_id for r in rollouts if r.termination_reason == "max_turns_exceeded"
        )
    )
    assert 0 < len(expected) < len({r.example_id for r in rollouts})
    open_report(page, view(results, tmp_path / "calc.html"))
    page.select_option("#filter-reason", "max_turns_exceeded")
    assert shown_count(page) == len(expected)
    assert shown_ids(page) == expected
    page.select_option("#filter-reason", "finished")
    assert shown_count(page) == len({r.example_id for r in rollouts})
    page.select_option("#filter-reason", "")
    page.fill("#filter-max", "0")
    page.press("#filter-max", "Enter")
    zero = dict.fromkeys(r.example_id for r in rollouts if r.rewards["correct"] == 0)
    assert shown_ids(page) == list(zero)
    page.select_option("#filter-key", "used_tools")
    zero_tools = dict.fromkeys(r.example_id for r in rollouts if r.rewards["used_tools"] == 0)
    assert shown_ids(page) == list(zero_tools)
    page.fill("#filter-max", "")
    page.check("#filter-flat")
    flat = [
        example_id
        for example_id in dict.fromkeys(r.example_id for r in rollouts)
        if len({json.dumps(r.rewards) for r in rollouts if r.example_id == example_id}) == 1
    ]
    page.press("#filter-max", "Enter")
    assert shown_ids(page) == flat
    assert_clean(page)


def column_means(page: Any) -> list[float]:
    return page.eval_on_selector_all(
        '#examples-body td[data-key="correct"]',
        "cells => cells.map(c => parseFloat(c.textContent))",
    )


def test_sorting_by_a_reward_column(
    example_runs: dict[str, Path], page: Any, tmp_path: Path
) -> None:
    results = example_runs["quickstart"]
    open_report(page, view(results, tmp_path / "qs.html"))
    page.click('#examples-head th[data-column="key0"]')  # highest mean first
    means = column_means(page)
    assert means == sorted(means, reverse=True) and means[0] > means[-1]
    page.click('#examples-head th[data-column="key0"]')
    means = column_means(page)
    assert means == sorted(means)
    assert_clean(page)


def test_opening_a_group_shows_its_transcripts_tool_arguments_and_logs(
    example_runs: dict[str, Path], page: Any, tmp_path: Path
) -> None:
    results = example_runs["calculator"]
    rollouts = read_results(results).rollouts
    failed = next(r for r in rollouts if r.termination_reason == "max_turns_exceeded")
    group = [r for r in rollouts if r.example_id == failed.example_id]
    open_report(page, view(results, tmp_path / "calc.html"))
    page.click(f'#examples-body tr[data-example-id="{failed.example_id}"]')
    detail = page.locator("#detail")
    assert detail.get_attribute("data-example-id") == failed.example_id
    assert page.locator("#detail .rollout").count() == len(group)
    text = detail.inner_text()
    question = failed.messages[1]["content"]
    assert question in text and text.count(question) == 1  # the shared prompt, shown once
    call = failed.messages[2]["tool_calls"][0]["function"]
    arguments = json.loads(call["arguments"])
    pretty = page.locator("#detail .rollout").nth(failed.group_index).locator("pre.arguments")
    assert pretty.first.inner_text() == json.dumps(arguments, indent=2)
    name = pretty.first.locator("xpath=..").locator(".name").inner_text()
    assert name == call["name"]
    assert "max_turns_exceeded" in text
    assert "benchmax.rollout.terminated" in text  # the captured log record
    assert page.evaluate("location.hash") == f"#example-{failed.example_index}"
    page.keyboard.press("Escape")
    assert detail.is_hidden()
    assert_clean(page)


def test_a_link_to_an_example_opens_it(
    example_runs: dict[str, Path], page: Any, tmp_path: Path
) -> None:
    html = view(example_runs["exact_match"], tmp_path / "em.html")
    page.goto(html.resolve().as_uri() + "#example-3")
    page.wait_for_selector("body[data-ready=true]")
    third = read_results(example_runs["exact_match"]).rollouts[3 * 4]
    assert page.locator("#detail").get_attribute("data-example-id") == third.example_id
    assert page.locator("#detail").is_visible()
    assert_clean(page)


SCRIPT_TEXTS = {
    "user": '<script>window.__pwned = "user"</script>',
    "assistant": "</script><script>window.__pwned = 'assistant'</script>"
    "<img src=x onerror=\"window.__pwned = 'img'\">\u2028after a line separator",
    "arguments": json.dumps({"code": "</script><script>window.__pwned = 'args'</script>"}),
    "tool": "<!--<script>window.__pwned = 'tool'</script>",
    "log": "<script>window.__pwned = 'log'</script>",
}


def hostile_results(path: Path) -> Path:
    transcript = [
        {"role": "system", "content": "Answer."},
        {"role": "user", "content": SCRIPT_TEXTS["user"]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "run<b>it</b>", "arguments": SCRIPT_TEXTS["arguments"]}}]},
        {"role": "tool", "tool_call_id": "c1", "content": SCRIPT_TEXTS["tool"]},
        {"role": "assistant", "content": SCRIPT_TEXTS["assistant"]},
    ]  # fmt: skip
    logs = [{"time": "t", "level": "ERROR", "logger": "x", "message": SCRIPT_TEXTS["log"],
             "exception": "Traceback\n<script>window.__pwned = 'traceback'</script>"}]  # fmt: skip
    head = header(model="<script>window.__pwned = 'header'</script>{{DATA}}", group_size=2)
    records = [
        rollout(0, "ex-<i>1</i>", 0, rewards={"ok": 1.0}, transcript=transcript, logs=logs),
        rollout(0, "ex-<i>1</i>", 1, rewards={"ok": 0.0}, reason="<b>odd</b>",
                transcript=transcript[:2]),
    ]  # fmt: skip
    return write(path, head, records)


def test_script_in_model_text_is_shown_as_text_and_never_runs(page: Any, tmp_path: Path) -> None:
    html = view(hostile_results(tmp_path / "hostile.jsonl"), tmp_path / "hostile.html")
    assert html.read_text().count("<script") == 2  # the data element and the page's script
    open_report(page, html)
    page.select_option("#filter-reason", "<b>odd</b>")
    assert shown_ids(page) == ["ex-<i>1</i>"]
    page.click("#examples-body tr[data-example-id]")
    page.wait_for_selector("#detail .rollout")
    page.locator("#detail details").evaluate_all("nodes => nodes.forEach(n => n.open = true)")
    text = page.locator("body").inner_text()
    for needle in (*SCRIPT_TEXTS.values(), "run<b>it</b>", "<b>odd</b>", "ex-<i>1</i>"):
        for line in needle.split("\u2028"):
            if needle is SCRIPT_TEXTS["arguments"]:
                line = json.loads(needle)["code"]
            assert line in text, line
    assert "<script>window.__pwned = 'header'</script>{{DATA}}" in text
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img, main b, main i").count() == 0
    assert_clean(page)


def test_reasoning_list_content_and_images(page: Any, tmp_path: Path) -> None:
    transcript = [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}},
        ]},
        {"role": "assistant", "reasoning_content": "The user shows a cat.",
         # beyond.md §9: <think> in any case, with attributes
         "content": '<THINK mode="fast">whiskers, so a cat</Think>A cat.'},
    ]  # fmt: skip
    records = [rollout(0, "img", k, rewards={"ok": 1.0}, transcript=transcript,
                       usage={"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912})
               for k in range(2)]  # fmt: skip
    html = view(write(tmp_path / "img.jsonl", header(group_size=2), records), tmp_path / "i.html")
    open_report(page, html)
    assert int(value(page, "usage-total-prompt_tokens")) == 1800
    page.click("#examples-body tr[data-example-id]")
    detail = page.locator("#detail")
    text = detail.inner_text()
    assert "What is in this picture?" in text
    assert "[image: https://example.invalid/cat.png]" in text
    assert "data:image/png;base64,… (5,022 characters)" in text
    assert page.locator("#detail img").count() == 0
    reasoning = page.locator("#detail details.reasoning")
    assert reasoning.count() == 4  # reasoning_content and a <think> block, per rollout
    assert all(not node.evaluate("n => n.open") for node in reasoning.all())
    assert "whiskers, so a cat" not in text  # collapsed
    reasoning.first.locator("summary").click()
    assert "The user shows a cat." in detail.inner_text()
    assert "A cat." in text and "tokens" in text
    assert_clean(page)


def test_twenty_thousand_rollouts_open_filter_and_search(page: Any, tmp_path: Path) -> None:
    results = large_run(tmp_path / "large.jsonl")
    html = tmp_path / "large.html"
    output = invoke("view", results, "-o", html).output
    assert "5000 groups, 20000 rollouts" in output
    print(output.strip())
    started = time.perf_counter()
    open_report(page, html)
    first_page = time.perf_counter() - started
    script_ms = page.evaluate("document.body.dataset.renderMs")
    # Its speed is a benchmark (benchmarks/view_report.py), not asserted on a busy machine.
    print(f"first page after {first_page:.2f} s (script {script_ms} ms)")
    assert len(shown_ids(page)) == 50 and shown_count(page) == 5000
    rollouts = read_results(results).rollouts
    by_reason = Counter(
        example_id
        for example_id, reason in dict.fromkeys(
            (r.example_id, r.termination_reason) for r in rollouts
        )
        if reason == "model_error"
    )
    page.select_option("#filter-reason", "model_error")
    assert shown_count(page) == len(by_reason)
    page.select_option("#filter-reason", "")
    target = rollouts[4321 * 4].example_id
    page.fill("#filter-text", target.upper())
    page.press("#filter-text", "Enter")
    assert shown_ids(page) == [target]
    page.fill("#filter-text", "timeouterror")
    page.press("#filter-text", "Enter")
    failing = {r.example_id for r in rollouts if r.termination_reason != "finished"}
    assert shown_count(page) == len(failing)
    page.click("#page-next")
    assert page.inner_text("#page-label").startswith("page 2 of")
    page.click("#examples-body tr[data-example-id]")
    assert page.locator("#detail .rollout").count() == 4
    assert_clean(page)


def test_screenshots_of_a_run(
    example_runs: dict[str, Path], chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Screenshots saved as artifacts; ``BENCHMAX_UPDATE_DOCS=1`` also refreshes docs/*.png.

    The run is shown as if made from the repository root (paths relative to it), as the
    README's commands make it.
    """
    results = tmp_path / "runs" / "calculator.jsonl"
    results.parent.mkdir()
    results.write_text(example_runs["calculator"].read_text().replace(f"{REPO}/", ""))
    monkeypatch.chdir(tmp_path)
    html = view(Path("runs/calculator.jsonl"), Path("runs/calculator.html"))
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(BROWSER_PATIENCE_MS)
    page = context.new_page()
    try:
        open_report(page, html)
        overview = ARTIFACTS / "view-report.png"
        page.screenshot(path=str(overview), clip={"x": 0, "y": 0, "width": 1280, "height": 1500},
                        full_page=True)  # fmt: skip
        failed = next(
            r
            for r in read_results(example_runs["calculator"]).rollouts
            if r.termination_reason != "finished"
        )
        page.click(f'#examples-body tr[data-example-id="{failed.example_id}"]')
        group = ARTIFACTS / "view-group.png"
        page.locator("#detail").screenshot(path=str(group))
        assert overview.stat().st_size > 10_000 and group.stat().st_size > 10_000
        if os.environ.get("BENCHMAX_UPDATE_DOCS"):
            for shot in (overview, group):
                (REPO / "docs" / shot.name).write_bytes(shot.read_bytes())
    finally:
        context.close()


def test_a_group_holding_a_30_mb_message_opens_clipped_with_show_all(
    page: Any, tmp_path: Path
) -> None:
    huge = "y" * 30_000_000
    records = [
        rollout(0, "big", k, rewards={"correct": float(k)},
                transcript=[{"role": "user", "content": "q"},
                            {"role": "assistant", "content": huge if k == 0 else "small"}])
        for k in range(2)
    ]  # fmt: skip
    results = write(tmp_path / "big.jsonl", header(group_size=2), records)
    open_report(page, view(results, tmp_path / "big.html"))
    page.click('#examples-body tr[data-example-id="big"]')
    page.wait_for_selector('#detail [data-testid="show-all"]', timeout=120_000)
    assert page.locator("#detail .clipped").get_attribute("data-length") == str(len(huge))
    assert len(page.locator("#detail .rollout").nth(0).inner_text()) < 200_000
    assert_clean(page)


def test_nan_and_infinite_values_render_without_script_errors(page: Any, tmp_path: Path) -> None:
    records = [
        rollout(0, "odd", 0, rewards={"correct": float("nan")}, usage={"prompt_tokens": 1}),
        rollout(0, "odd", 1, rewards={"correct": float("inf")}),
    ]
    records[0]["usage"]["completion_tokens"] = float("nan")
    records[1]["timings"]["group_seconds"] = float("nan")
    results = write(tmp_path / "odd.jsonl", header(group_size=2), records)
    open_report(page, view(results, tmp_path / "odd.html"))
    page.click('#examples-body tr[data-example-id="odd"]')
    assert page.locator("#detail .rollout").count() == 2
    assert_clean(page)


def test_simulated_users_and_judge_explanations(page: Any, tmp_path: Path) -> None:
    from tests.view.test_simulated_users_and_judges_view import results as chat_results

    open_report(page, view(chat_results(tmp_path), tmp_path / "chat.html"))
    page.click("#examples-body tr[data-example-id]")
    detail = page.locator("#detail")
    simulated = page.locator('#detail .msg[data-simulated="true"]')
    assert simulated.count() == 2  # one per rollout
    assert "simulated" in simulated.first.locator(".role").inner_text().lower()
    text = detail.inner_text()
    assert "simulated_user" not in text  # the marker is a label, not a stray field
    assert page.locator('#detail [data-testid="verdict"]').count() == 4
    assert "the refund follows the lookup" in text
    assert "rubric_grounded · score 1 · reward 1" in text
    assert "empty final reply" in text
    assert '"tickets"' in text
    assert_clean(page)


def test_a_group_beyond_the_transcript_budget_names_the_show_command(
    page: Any, tmp_path: Path
) -> None:
    from tests.view.synthetic import mixed_run

    from benchmax.results import write_html_report

    results = mixed_run(tmp_path / "mixed.jsonl")
    html = write_html_report(results, tmp_path / "mixed.html", transcript_budget=1500).path
    open_report(page, html)
    note = page.locator('[data-testid="omitted-note"]')
    assert note.is_visible() and "4 later groups" in note.inner_text()
    page.locator('#examples-body tr[data-example-id="ex2"]').click()
    assert page.locator('[data-testid="transcript-omitted"]').count() == 0
    assert "answer 2.0" in page.locator("#detail").inner_text()
    page.locator('#examples-body tr[data-example-id="ex0"]').click()
    omitted = page.locator('[data-testid="transcript-omitted"]')
    assert omitted.is_visible()
    command = page.locator('[data-testid="show-command"]').inner_text()
    assert command == f"benchmax show {results} --example ex0 --limit 3"
    detail = page.locator("#detail")
    assert page.locator("#detail .rollout").count() == 3
    assert "answer 0" not in detail.inner_text()
    assert "model_error" in detail.inner_text()  # reasons and rewards stay
    page.screenshot(path=str(ARTIFACTS / "view-beyond-budget.png"), full_page=True)
    assert_clean(page)


def test_a_rollouts_token_coverage_and_branches_are_shown(page: Any, tmp_path: Path) -> None:
    """A rollout whose second call re-rendered the first reply: two branches, every sampled
    token trained; the run's coverage tile and the rollout's facts say so."""
    calls = [
        {"finish_reason": "tool_calls", "usage": None, "seconds": 0.1, "message_index": 1,
         "prompt_token_ids": [1, 2], "completion_token_ids": [10, 11, 12],
         "completion_logprobs": [-0.1, -0.2, -0.3]},
        {"finish_reason": "stop", "usage": None, "seconds": 0.1, "message_index": 3,
         "prompt_token_ids": [1, 2, 12, 20], "completion_token_ids": [13, 14],
         "completion_logprobs": [-0.1, -0.2]},
    ]  # fmt: skip
    transcript = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "b"},
    ]
    line = rollout(0, "ex", 0, rewards={"correct": 1.0}, transcript=transcript)
    line["model_calls"] = calls
    results = write(tmp_path / "cov.jsonl", header(group_size=1), [line])
    open_report(page, view(results, tmp_path / "cov.html"))
    assert float(value(page, "token-coverage")) == 1.0
    page.click('#examples-body tr[data-example-id="ex"]')
    text = page.locator("#detail").inner_text()
    assert "token coverage" in text
    assert "100.0% of 5 sampled tokens trained · 2 branches: first (1 calls, 3 tokens), " in text
    assert "history_rewritten (1 calls, 2 tokens)" in text
    assert_clean(page)
