"""Readers (show, view, rescore) on hand-edited or foreign results files: a one-line error
naming file:line and field, or the odd value rendered as text; never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tests.view.synthetic import header, rollout, write

from benchmax.cli import cli


def run_cli(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def group(rewards: list[dict[str, Any]], **changes: Any) -> list[dict[str, Any]]:
    records = [
        rollout(0, "ex0", k, rewards=r, transcript=[{"role": "user", "content": "q"}])
        for k, r in enumerate(rewards)
    ]
    records[0].update(changes)
    return records


@pytest.mark.parametrize(
    "rewards",
    [
        [{"correct": float("nan")}, {"correct": 1.0}],
        [{"correct": float("inf")}, {"correct": float("-inf")}],
        [{"correct": 1e308}, {"correct": -1e308}],
        [{"correct": 1e308}, {"correct": 1e308}],
    ],
)
def test_non_finite_and_huge_rewards_render(tmp_path: Path, rewards: list[dict[str, Any]]) -> None:
    results = write(tmp_path / "r.jsonl", header(group_size=2), group(rewards))
    page = tmp_path / "r.html"
    viewed = run_cli("view", results, "-o", page)
    assert viewed.exit_code == 0, viewed.output
    data = page.read_text()
    assert ":NaN" not in data and ":Infinity" not in data and ":-Infinity" not in data
    assert run_cli("show", results).exit_code == 0


def test_nan_in_usage_and_timings_keeps_the_page_data_json(tmp_path: Path) -> None:
    records = group([{"correct": 1.0}, {"correct": 0.0}], usage={"prompt_tokens": float("nan")})
    records[1]["timings"] = {"group_seconds": float("inf")}
    results = write(tmp_path / "r.jsonl", header(group_size=2), records)
    page = tmp_path / "r.html"
    assert run_cli("view", results, "-o", page).exit_code == 0
    text = page.read_text()
    start = text.index('id="benchmax-data"')
    embedded = text[text.index(">", start) + 1 : text.index("</script>", start)]
    json.loads(embedded, parse_constant=lambda name: pytest.fail(f"bare {name} in page data"))


@pytest.mark.parametrize("command", ["show", "view", "rescore"])
def test_a_reward_too_large_for_a_float_is_a_one_line_error(tmp_path: Path, command: str) -> None:
    results = tmp_path / "r.jsonl"
    write(results, header(group_size=2), group([{"correct": 0}, {"correct": 1}]))
    text = results.read_text().replace('"correct": 0}', f'"correct": {10**400}}}', 1)
    results.write_text(text)
    result = run_cli(command, results)
    assert isinstance(result.exception, SystemExit), result.exception
    assert f"{results}:2" in result.output and "reward 'correct'" in result.output


@pytest.mark.parametrize("command", ["show", "view", "rescore"])
def test_deeply_nested_json_is_a_one_line_error(tmp_path: Path, command: str) -> None:
    results = tmp_path / "r.jsonl"
    write(results, header(group_size=2), group([{"correct": 0.0}, {"correct": 1.0}]))
    lines = results.read_text().splitlines()
    lines[1] = lines[1].replace('"logs": []', '"logs": ' + "[" * 100_000 + "]" * 100_000)
    results.write_text("\n".join(lines) + "\n")
    result = run_cli(command, results)
    assert isinstance(result.exception, SystemExit), result.exception
    assert f"{results}:2" in result.output and "nested too deeply" in result.output


def test_a_garbage_env_definition_is_shown_as_text_or_named(tmp_path: Path) -> None:
    head = header(group_size=2)
    head["definition"]["env"] = "garbage"
    results = write(tmp_path / "r.jsonl", head, group([{"correct": 0.0}, {"correct": 1.0}]))
    viewed = run_cli("view", results, "-o", tmp_path / "r.html")
    assert viewed.exit_code == 0, viewed.output
    assert "garbage" in (tmp_path / "r.html").read_text()
    head["definition"]["env"] = {"class": 5}
    write(results, head, group([{"correct": 0.0}, {"correct": 1.0}]))
    rescored = run_cli("rescore", results, "--data", tmp_path)
    assert isinstance(rescored.exception, SystemExit), rescored.exception
    assert "definition.env.class (5) is not module:Class" in rescored.output


def test_rescore_refuses_to_replace_an_existing_output_without_force(tmp_path: Path) -> None:
    results = write(tmp_path / "r.jsonl", header(group_size=2), group([{"c": 0.0}, {"c": 1.0}]))
    existing = tmp_path / "keep.jsonl"
    existing.write_text("mine\n")
    refused = run_cli("rescore", results, "--data", tmp_path, "-o", existing)
    assert isinstance(refused.exception, SystemExit)
    assert "exists; pass --force" in refused.output and existing.read_text() == "mine\n"
    head = header(group_size=2)
    head["definition"]["env"] = "garbage"
    write(results, head, group([{"c": 0.0}, {"c": 1.0}]))
    named = run_cli("rescore", results, "x.py:Env", "--data", tmp_path, "-o", tmp_path / "n.jsonl")
    assert isinstance(named.exception, SystemExit), named.exception  # no AttributeError


# ---- a training run directory whose metrics or eval files are damaged ------------------------


def training_run(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    records = [
        dict(rollout(0, "ex0", k, rewards={"correct": float(k)}), step=1, weights_version=0)
        for k in range(2)
    ]
    write(root / "rollouts.jsonl", header(group_size=2), records)
    (root / "eval").mkdir()
    write(root / "eval" / "step-0.jsonl", header(group_size=2), group([{"correct": 0.0}] * 2))
    write(root / "eval" / "step-2.jsonl", header(group_size=2), group([{"correct": 1.0}] * 2))
    return root


GOOD_STEP = {"step": 2, "reward": 0.5, "termination_reasons": {"finished": 4}, "rewards": {}}


@pytest.mark.parametrize(
    "bad",
    [
        {"step": 1, "termination_reasons": ["finished", 4]},
        {"step": 1, "termination_reasons": {"finished": "four"}},
        {"step": 1, "termination_reasons": "finished"},
        {"step": 1, "rewards": ["correct", 1.0], "completion_tokens": 7, "trainer": "loss"},
        {"step": 1, "reward": "high", "zero_variance_group_share": [0.5]},
        {"step": True, "reward": 1.0},
        {"step": 10**400, "reward": 1.0},
    ],
)
def test_a_metrics_line_with_wrong_field_types_is_skipped_with_a_warning(
    tmp_path: Path, bad: dict[str, Any]
) -> None:
    root = training_run(tmp_path)
    lines = [json.dumps(bad).replace("1" * 401, "1" * 401), json.dumps(GOOD_STEP)]
    (root / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    result = run_cli("view", root)
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    page = (root / "training.html").read_text()
    assert 'data-step="2"' in page
    if bad["step"] == 1:
        assert "metrics.jsonl:1: skipped" in result.output


@pytest.mark.parametrize("damage", ["missing", "empty", "torn", "not results"])
def test_one_missing_or_empty_eval_file_leaves_the_rest_of_the_page(
    tmp_path: Path, damage: str
) -> None:
    root = training_run(tmp_path)
    (root / "metrics.jsonl").write_text(json.dumps(GOOD_STEP) + "\n")
    step_0 = root / "eval" / "step-0.jsonl"
    if damage == "missing":
        step_0.unlink()
        step_0.symlink_to(root / "eval" / "nowhere.jsonl")
    elif damage == "empty":
        step_0.write_text("")
    elif damage == "torn":
        step_0.write_text(step_0.read_text()[:30])
    else:
        step_0.write_text("[1, 2]\n")
    result = run_cli("view", root)
    assert result.exit_code == 0, result.output
    page = (root / "training.html").read_text()
    assert 'data-testid="chart-eval"' in page
    assert "eval/step-0.jsonl" in result.output and "skipped" in result.output


@pytest.mark.parametrize("depth", [800, 1400])
def test_a_transcript_nested_too_deep_to_spool_leaves_that_group_without_it(
    tmp_path: Path, depth: int
) -> None:
    """A message nested 800 deep used to fail the page with RecursionError while pickling."""
    results = tmp_path / "r.jsonl"
    records = group([{"correct": 0.0}, {"correct": 1.0}])
    records += [
        rollout(
            1, "ex1", k, rewards={"correct": 1.0}, transcript=[{"role": "user", "content": "w"}]
        )
        for k in range(2)
    ]
    write(results, header(group_size=2), records)
    lines = results.read_text().splitlines()
    deep = "[" * depth + "]" * depth
    lines[1] = lines[1].replace('"content": "q"', f'"content": "q", "extra": {deep}', 1)
    results.write_text("\n".join(lines) + "\n")
    result = run_cli("view", results)
    assert result.exit_code == 0, result.output
    page = results.with_suffix(".html").read_text()
    assert "ex0" in page and "ex1" in page
