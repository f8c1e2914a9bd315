"""Every example runs through the CLI on its scripted mock policy, with a spread of rewards."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.cli.conftest import ThreadedServer

from benchmax.cli import cli
from benchmax.results import read_results

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def run(*args: object, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, [str(arg) for arg in args], env=env)
    assert result.exit_code == 0, result.output
    return result


def rows(name: str) -> int:
    return len((EXAMPLES / name / "eval.jsonl").read_text().splitlines())


def report(path: Path) -> dict:
    return json.loads(path.with_name(path.stem + ".report.json").read_text())


def example_args(name: str, target: str, policy: str, output: Path) -> list[object]:
    return [
        "run", f"{EXAMPLES / name}/env.py:{target}", "--data", EXAMPLES / name,
        "--mock-policy", f"{EXAMPLES / name}/policy.py:{policy}", "-o", output,
    ]  # fmt: skip


def assert_realistic_spread(summary: dict, key: str) -> None:
    stats = summary["reward_stats"][key]
    assert 0.1 < stats["mean"] < 0.9, stats
    assert stats["min"] == 0.0 and stats["max"] == 1.0
    assert 0.0 < summary["no_variance_group_share"] < 1.0


def test_quickstart(tmp_path: Path) -> None:
    output = tmp_path / "qs.jsonl"
    result = run(*example_args("quickstart", "QuickStartEnv", "reply", output))
    assert "mock model" in result.output
    summary = report(output)
    assert summary["groups"] == rows("quickstart") and summary["rollouts"] == 4 * rows("quickstart")
    assert summary["rollouts_by_reason"] == {"finished": 4 * rows("quickstart")}
    assert_realistic_spread(summary, "correct")


def test_quickstart_train_split(tmp_path: Path) -> None:
    output = tmp_path / "train.jsonl"
    run(*example_args("quickstart", "QuickStartEnv", "reply", output), "--split", "train")
    lines = (EXAMPLES / "quickstart" / "train.jsonl").read_text().splitlines()
    assert report(output)["groups"] == len(lines)


def test_exact_match(tmp_path: Path) -> None:
    output = tmp_path / "em.jsonl"
    run(*example_args("exact_match", "ExactMatchEnv", "answer", output))
    summary = report(output)
    assert summary["groups"] == rows("exact_match")
    assert_realistic_spread(summary, "exact_match")
    stats = summary["reward_stats"]
    assert stats["contains_answer"]["mean"] > stats["exact_match"]["mean"]


def test_calculator_multi_turn_tools(tmp_path: Path) -> None:
    output = tmp_path / "calc.jsonl"
    run(*example_args("calculator", "CalculatorEnv", "solve", output))
    summary = report(output)
    assert set(summary["rollouts_by_reason"]) == {"finished", "max_turns_exceeded"}
    assert_realistic_spread(summary, "correct")
    assert 0.0 < summary["reward_stats"]["used_tools"]["mean"] < 1.0
    careful = next(
        r for r in read_results(output).rollouts if r.rewards == {"correct": 1.0, "used_tools": 1.0}
    )
    roles = [message["role"] for message in careful.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert careful.timings["tool_seconds"] >= 0


def test_mcp_tools_from_a_stdio_server(tmp_path: Path) -> None:
    from tests.tools.mcp_support import child_processes

    children = child_processes()
    output = tmp_path / "library.jsonl"
    run(*example_args("mcp_tools", "LibraryEnv", "library", output))
    assert child_processes() <= children  # the shared server ended with the run
    summary = report(output)
    assert summary["rollouts_by_reason"] == {"finished": 4 * rows("mcp_tools")}
    assert_realistic_spread(summary, "correct")
    stats = summary["reward_stats"]
    assert stats["grounded"]["mean"] > stats["correct"]["mean"]  # looked up the wrong book
    tool_texts = [
        str(message["content"])
        for rollout in read_results(output).rollouts
        for message in rollout.messages or ()
        if message["role"] == "tool"
    ]
    assert any("no book with id" in text for text in tool_texts)  # the server's isError
    assert any("'query' is a required property" in text for text in tool_texts)
    assert any('"year": ' in text for text in tool_texts)


def test_rubric_judge_on_the_embedded_mock(tmp_path: Path) -> None:
    output = tmp_path / "judge.jsonl"
    run(
        *example_args("rubric_judge", "RubricJudgeEnv", "respond", output), "-n", "12",
        "--env-arg", "judge_base_url=@mock", "--auth", "judge=BENCHMAX_TEST_UNSET_JUDGE_KEY",
    )  # fmt: skip
    summary = report(output)
    assert summary["rollouts_by_reason"] == {"finished": 4 * 12}
    for key in ("rubric_correctness", "rubric_concision", "rubric_fabrication"):
        assert 0.0 < summary["reward_stats"][key]["mean"] < 1.0, key
    header = read_results(output).header
    assert header["definition"]["env"]["constructor_args"] == {"judge_base_url": "@mock"}


def test_rubric_judge_mock_binds_injected_credentials_found_in_the_env(tmp_path: Path) -> None:
    output = tmp_path / "judge.jsonl"
    run(
        *example_args("rubric_judge", "RubricJudgeEnv", "respond", output),
        "--env-arg", "judge_base_url=@mock", "-n", "2",
    )  # fmt: skip
    assert report(output)["rollouts_by_reason"] == {"finished": 8}


def test_rubric_judge_against_real_endpoints_uses_the_bound_judge_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from rubric_judge.policy import respond

    output = tmp_path / "judge.jsonl"
    with ThreadedServer(respond, model="policy-model") as server:
        run(
            "run", f"{EXAMPLES}/rubric_judge/env.py:RubricJudgeEnv", "--data",
            EXAMPLES / "rubric_judge", "-n", "3", "-k", "2", "--base-url", server.base_url,
            "--model", "policy-model", "--env-arg", f"judge_base_url={server.base_url}",
            "--auth", "judge=JUDGE_KEY_VARIABLE", "-o", output,
            env={"JUDGE_KEY_VARIABLE": "judge-secret-value"},
        )  # fmt: skip
        requests = server.requests
    judge_calls = [r for r in requests if (r.body or {}).get("model") == "mock-judge"]
    assert len(judge_calls) == 3 * 2 * 3  # examples x rollouts x rubrics
    assert {r.headers.get("authorization") for r in judge_calls} == {"Bearer judge-secret-value"}
    assert "judge-secret-value" not in output.read_text()


def test_support_chat_with_a_simulated_customer_and_a_trajectory_judge(tmp_path: Path) -> None:
    from benchmax.trajectory import is_simulated_user

    output = tmp_path / "chat.jsonl"
    run(
        *example_args("support_chat", "SupportChatEnv", "respond", output),
        "--env-arg", "judge_base_url=@mock",
    )  # fmt: skip
    summary = report(output)
    assert summary["rollouts_by_reason"] == {"finished": 4 * rows("support_chat")}
    assert_realistic_spread(summary, "resolved")
    rollouts = read_results(output).rollouts
    customer_turns = [m for r in rollouts for m in r.messages if is_simulated_user(m)]
    assert customer_turns and {m["content"] for m in customer_turns} >= {"It's order B42."}
    # The judge read the tool results: it caught claims the deterministic check missed.
    caught = [
        r for r in rollouts
        if r.rewards["resolved"] == 1.0 and r.rewards["rubric_unsupported_promise"] == 0.0
    ]  # fmt: skip
    assert caught and all("cannot be refunded" in str(r.messages) for r in caught)
    for r in rollouts:
        judge = r.annotations["judge"]
        assert set(judge) == {"rubric_grounded", "rubric_unsupported_promise"}
        assert judge["rubric_grounded"]["reward"] == r.rewards["rubric_grounded"]
        assert judge["rubric_grounded"]["reasoning"] and judge["rubric_grounded"]["remarks"]


def test_support_chat_against_real_endpoints_uses_the_bound_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from support_chat.policy import respond

    output = tmp_path / "chat.jsonl"
    with ThreadedServer(respond, model="policy-model") as server:
        run(
            "run", f"{EXAMPLES}/support_chat/env.py:SupportChatEnv", "--data",
            EXAMPLES / "support_chat", "-n", "3", "-k", "2", "--base-url", server.base_url,
            "--model", "policy-model", "--env-arg", f"judge_base_url={server.base_url}",
            "--auth", "judge=JUDGE_KEY_VARIABLE", "--auth", "user=USER_KEY_VARIABLE",
            "-o", output,
            env={"JUDGE_KEY_VARIABLE": "judge-secret-value", "USER_KEY_VARIABLE": "user-secret"},
        )  # fmt: skip
        requests = server.requests
    by_model = {
        model: {
            r.headers.get("authorization") for r in requests if (r.body or {}).get("model") == model
        }
        for model in ("mock-judge", "mock-user")
    }
    assert by_model["mock-judge"] == {"Bearer judge-secret-value"}
    assert by_model["mock-user"] == {"Bearer user-secret"}
    text = output.read_text()
    assert "judge-secret-value" not in text and "user-secret" not in text


def test_examples_are_deterministic(tmp_path: Path) -> None:
    tables = []
    for attempt in range(2):
        output = tmp_path / f"calc{attempt}.jsonl"
        run(*example_args("calculator", "CalculatorEnv", "solve", output), "-n", "8")
        tables.append(
            {
                (r.example_index, r.group_index): (r.termination_reason, r.rewards)
                for r in read_results(output).rollouts
            }
        )
    assert tables[0] == tables[1]


def readme_main_job() -> str:
    text = (REPO / "README.md").read_text()
    commands = [
        line.strip()
        for line in text.splitlines()
        if line.strip().startswith("uv run benchmax run examples/")
    ]
    assert commands, "README has no main-job command"
    return commands[0]


def test_readme_quick_start_is_two_commands_after_installing_uv() -> None:
    text = (REPO / "README.md").read_text()
    block = text.split("pip install uv", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert commands == [readme_main_job(), "uv run pytest"]


@pytest.mark.slow
def test_readme_main_job_with_uv(tmp_path: Path) -> None:
    """The exact README command through ``uv run`` (slow: resolves the project)."""
    command = [*shlex.split(readme_main_job()), "-o", str(tmp_path / "readme.jsonl")]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert report(tmp_path / "readme.jsonl")["groups"] > 0


def test_readme_main_job(tmp_path: Path) -> None:
    """The README command, as the console script would run it, from the repository root."""
    arguments = shlex.split(readme_main_job())[3:]  # drop "uv run benchmax"
    output = tmp_path / "readme.jsonl"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmax.cli", *arguments, "-o", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "mock model" in completed.stderr
    assert report(output)["groups"] > 0
