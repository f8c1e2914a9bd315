"""``benchmax validate``: every example passes; failures show in the table, JSON and exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from benchmax.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GOOD = Path(__file__).with_name("envs.py")


def invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, ["validate", *(str(arg) for arg in args)])


@pytest.mark.parametrize(
    ("name", "target", "policy", "extra"),
    [
        ("quickstart", "QuickStartEnv", "reply", []),
        ("exact_match", "ExactMatchEnv", "answer", []),
        ("calculator", "CalculatorEnv", "solve", []),
        ("rubric_judge", "RubricJudgeEnv", "respond", ["--env-arg", "judge_base_url=@mock"]),
    ],
)
def test_every_example_environment_passes(
    name: str, target: str, policy: str, extra: list[str]
) -> None:
    result = invoke(
        f"{EXAMPLES / name}/env.py:{target}", "--data", EXAMPLES / name,
        "--mock-policy", f"{EXAMPLES / name}/policy.py:{policy}", *extra, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] is True
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses["bundle: fresh interpreter"] == "passed", report
    assert statuses["rollouts"] == "passed"
    assert report["counts"]["failed"] == 0


def test_the_table_names_every_check_and_the_verdict(tmp_path: Path) -> None:
    (tmp_path / "eval.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    result = invoke(f"{GOOD}:GoodEnv", "--data", tmp_path, "--no-fresh-interpreter")
    assert result.exit_code == 0, result.output
    for text in ("dataset eval: ids stable", "reward variance", "bundle: fresh interpreter"):
        assert text in result.output
    assert "ok: " in result.output and ", 1 warning, " in result.output


def test_help_and_output_say_that_validate_runs_the_environments_code(tmp_path: Path) -> None:
    assert "imports TARGET and runs its code" in " ".join(invoke("--help").output.split())
    (tmp_path / "eval.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    result = invoke(f"{GOOD}:GoodEnv", "--data", tmp_path, "--no-fresh-interpreter")
    assert "validate imported the environment and ran its code" in " ".join(result.output.split())
    failed = invoke(f"{tmp_path}/missing.py:Env", "--data", tmp_path)
    assert "ran its code" in " ".join(failed.output.split())


def test_a_failed_check_exits_non_zero_and_says_what_to_change(tmp_path: Path) -> None:
    (tmp_path / "eval.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    result = invoke(f"{GOOD}:NeedsArgumentEnv", "--data", tmp_path, "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    constructor = next(c for c in report["checks"] if c["name"] == "constructor")
    assert constructor["status"] == "failed" and "--env-arg" in constructor["detail"]
    passing = invoke(
        f"{GOOD}:NeedsArgumentEnv", "--data", tmp_path, "--env-arg", "level=3",
        "--no-fresh-interpreter",
    )  # fmt: skip
    assert passing.exit_code == 0, passing.output


def test_a_target_that_does_not_import_is_a_failed_check(tmp_path: Path) -> None:
    result = invoke(f"{tmp_path}/missing.py:Env", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["checks"] == [
        {
            "name": "target",
            "status": "failed",
            "detail": f"no such file: {tmp_path}/missing.py; check the path and class name",
        }
    ]
    table = invoke(f"{GOOD}:NoSuchEnv")
    assert table.exit_code == 1
    assert "'NoSuchEnv'" in table.output and "failed" in table.output
    (check,) = json.loads(invoke(f"{GOOD}:NoSuchEnv", "--json").output)["checks"]
    assert check["detail"].startswith(
        f"{GOOD} has no 'NoSuchEnv'; environment classes in it: BadContentEnv, BadRoleEnv,"
    )


def test_a_target_that_is_not_an_environment_fails(tmp_path: Path) -> None:
    result = invoke(f"{GOOD}:NotAnEnv", "--data", tmp_path, "--json")
    assert result.exit_code == 1
    assert "is not an Environment subclass" in result.output


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    result = invoke(f"{GOOD}:GoodEnv", "--base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 2
    assert "--model is required with --base-url" in result.output
    result = invoke(f"{GOOD}:GoodEnv", "--mock-policy", "nope.py:reply")
    assert result.exit_code == 3
    assert "mock policy" in result.output or "no such file" in result.output
    result = invoke(
        f"{GOOD}:GoodEnv", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
        "--api-key-env", "BENCHMAX_TEST_UNSET_KEY",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "BENCHMAX_TEST_UNSET_KEY, which is not set" in result.output


def test_a_real_endpoint_is_used_for_the_rollouts(tmp_path: Path) -> None:
    (tmp_path / "eval.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    result = invoke(
        f"{GOOD}:GoodEnv", "--data", tmp_path, "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--json", "--no-fresh-interpreter",
    )  # fmt: skip
    assert result.exit_code == 1
    rollouts = next(c for c in json.loads(result.output)["checks"] if c["name"] == "rollouts")
    assert "http://127.0.0.1:9/v1" in rollouts["detail"] and "model_error" in rollouts["detail"]
