"""``benchmax run`` end to end against LiteLLM's proxy, a real third-party server (issue 9 §7).

The proxy runs as a subprocess on 127.0.0.1 (see ``conftest.py``); its models answer without
any upstream. Each test runs the CLI and reads the results file back with ``read_results``.
Tests marked ``litellm`` are deselected by default (the proxy takes 15-40 s to start);
``uv run pytest -m litellm tests/litellm_proxy`` runs them, as ``.ci/run`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmax.cli import cli
from benchmax.results import read_results

pytestmark = pytest.mark.litellm

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HERE = Path(__file__).resolve().parent
ANSWER_ENV = f"{HERE / 'answer_env.py'}:AnswerTagEnv"
QUICKSTART = (f"{EXAMPLES / 'quickstart' / 'env.py'}:QuickStartEnv", EXAMPLES / "quickstart")
CALCULATOR = (f"{EXAMPLES / 'calculator' / 'env.py'}:CalculatorEnv", EXAMPLES / "calculator")
KEY_VARIABLE = "BENCHMAX_LITELLM_TEST_KEY"


def run(
    proxy: Any,
    target: str,
    data: Path,
    model: str,
    output: Path,
    *options: object,
    all_fail: bool = False,
) -> list[Mapping[str, Any]]:
    """``benchmax run`` against the proxy; returns the rollouts read back from the results.

    ``all_fail``: every rollout is expected to fail, so the run exits 1 after its summary."""
    arguments = [
        "run", target, "--data", data, "--base-url", proxy.base_url, "--model", model,
        "--api-key-env", KEY_VARIABLE, "-o", output, *options,
    ]  # fmt: skip
    result = CliRunner().invoke(
        cli, [str(argument) for argument in arguments], env={KEY_VARIABLE: proxy.master_key}
    )
    assert result.exit_code == (1 if all_fail else 0), result.output
    if all_fail:
        assert "Error: every rollout failed (" in result.output
    assert "mock model" not in result.output
    written = output.read_text() + output.with_name(output.stem + ".report.json").read_text()
    assert proxy.master_key not in written + result.output
    results = read_results(output)
    assert results.header["definition"]["model"] == model
    return [r.to_json() for r in results.rollouts]  # the lines as the file holds them


def by_example(rollouts: Sequence[Mapping[str, Any]], field: str) -> list[list[Any]]:
    groups: dict[int, list[Any]] = {}
    for rollout in rollouts:
        groups.setdefault(rollout["example_index"], []).append(rollout[field])
    return [groups[index] for index in sorted(groups)]


def assistant_messages(rollout: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [m for m in rollout["transcript"] if m["role"] == "assistant"]


def test_a_key_the_gateway_refuses_settles_every_rollout(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    """LiteLLM refuses an unknown key with a 4xx: each rollout is a model_error, the run ends."""
    wrong = replace(litellm_proxy, master_key="sk-" + "0" * 48)
    target, data = QUICKSTART
    rollouts = run(
        wrong, target, data, "mock-text", tmp_path / "wk.jsonl", "-n", 2, "-k", 2, all_fail=True
    )
    assert len(rollouts) == 4
    assert {r["termination_reason"] for r in rollouts} == {"model_error"}
    assert all(r["rewards"] == {"correct": 0.0} for r in rollouts)
    for rollout in rollouts:
        logged = " ".join(e["message"] + e.get("exception", "") for e in rollout["logs"])
        assert re.search(r"Error code: 4\d\d", logged), logged


def test_mock_response_text_on_the_quickstart_example(litellm_proxy: Any, tmp_path: Path) -> None:
    target, data = QUICKSTART
    rollouts = run(
        litellm_proxy, target, data, "mock-text", tmp_path / "qs.jsonl", "-n", 3, "-k", 2
    )
    assert len(rollouts) == 6
    assert {r["termination_reason"] for r in rollouts} == {"finished"}
    # only the first question (Hamlet) has the mocked answer
    assert by_example(rollouts, "rewards") == [
        [{"correct": 1.0}] * 2,
        [{"correct": 0.0}] * 2,
        [{"correct": 0.0}] * 2,
    ]
    transcript = rollouts[0]["transcript"]
    assert [m["role"] for m in transcript] == ["system", "user", "assistant"]
    assert transcript[1]["content"] == "Who wrote Hamlet?"
    assert transcript[-1]["content"] == "Hamlet was written by <answer>Shakespeare</answer>."
    assert all(r["logs"] == [] for r in rollouts)


def test_mock_tool_calls_run_the_calculator_tools_until_the_turn_limit(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    target, data = CALCULATOR
    rollouts = run(
        litellm_proxy, target, data, "mock-tools", tmp_path / "calc.jsonl", "-n", 2, "-k", 2
    )
    assert len(rollouts) == 4
    assert {r["termination_reason"] for r in rollouts} == {"max_turns_exceeded"}
    for rollout in rollouts:
        assert rollout["rewards"] == {"correct": 0.0, "used_tools": 0.0}
        transcript = rollout["transcript"]
        calls = [call for m in assistant_messages(rollout) for call in m["tool_calls"]]
        assert len(calls) == 4  # max_turns of the calculator example
        assert {c["function"]["name"] for c in calls} == {"add"}
        assert all(c["function"]["arguments"] == '{"a": 1, "b": 2}' for c in calls)
        tool_messages = [m for m in transcript if m["role"] == "tool"]
        assert [m["content"] for m in tool_messages] == ['{"result":3}'] * 4


def test_mock_tool_call_ids_repeated_by_the_server_are_made_unique(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    """beyond.md §7: the proxy repeats ``call_add`` every turn; ids stay unique per rollout."""
    target, data = CALCULATOR
    rollouts = run(
        litellm_proxy, target, data, "mock-tools", tmp_path / "ids.jsonl", "-n", 1, "-k", 1
    )
    (rollout,) = rollouts
    ids = [call["id"] for m in assistant_messages(rollout) for call in m["tool_calls"]]
    assert len(set(ids)) == len(ids) == 4
    answered = [m["tool_call_id"] for m in rollout["transcript"] if m["role"] == "tool"]
    assert answered == ids


def test_a_rate_limited_model_settles_every_rollout_and_the_run_completes(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    target, data = QUICKSTART
    rollouts = run(
        litellm_proxy, target, data, "mock-rate-limited", tmp_path / "rl.jsonl", "-n", 2, "-k", 2,
        all_fail=True,
    )  # fmt: skip
    assert len(rollouts) == 4
    assert {r["termination_reason"] for r in rollouts} == {"model_error"}
    assert all(r["rewards"] == {"correct": 0.0} for r in rollouts)
    for rollout in rollouts:
        logged = " ".join(e["message"] + e.get("exception", "") for e in rollout["logs"])
        assert "termination_reason=model_error" in logged
        assert "429" in logged and "mock rate limit error" in logged


def test_a_context_window_exceeded_model_settles_as_context_exceeded(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    """beyond.md §9: LiteLLM's ContextWindowExceededError, as the proxy sends it."""
    target, data = QUICKSTART
    rollouts = run(
        litellm_proxy, target, data, "mock-context-window", tmp_path / "cw.jsonl",
        "-n", 1, "-k", 2,
    )  # fmt: skip
    assert {r["termination_reason"] for r in rollouts} == {"context_exceeded"}
    assert all(r["rewards"] == {"correct": 0.0} for r in rollouts)
    for rollout in rollouts:
        logged = " ".join(e["message"] + e.get("exception", "") for e in rollout["logs"])
        assert "termination_reason=context_exceeded" in logged
        assert "ContextWindowExceededError" in logged


@pytest.mark.parametrize(
    ("model", "reason", "correct"),
    [
        ("scripted-think", "finished", [1.0, 1.0, 1.0]),  # the draft inside <think> is ignored
        ("scripted-template", "finished", [1.0, 1.0, 1.0]),  # text before a lone </think>
        ("scripted-parts", "finished", [1.0, 1.0, 1.0]),  # content as a list of text parts
        ("scripted-cutoff", "output_exceeded", [0.0, 0.0, 0.0]),  # never left <think>
    ],
)
def test_scripted_reasoning_and_content_parts_are_scored_right(
    litellm_proxy: Any, tmp_path: Path, model: str, reason: str, correct: list[float]
) -> None:
    rollouts = run(litellm_proxy, ANSWER_ENV, HERE / "data", model, tmp_path / "r.jsonl", "-k", 2)
    assert len(rollouts) == 6
    assert {r["termination_reason"] for r in rollouts} == {reason}
    assert by_example(rollouts, "rewards") == [[{"correct": value}] * 2 for value in correct]


def test_content_parts_stay_parts_in_the_transcript(litellm_proxy: Any, tmp_path: Path) -> None:
    rollouts = run(
        litellm_proxy,
        ANSWER_ENV,
        HERE / "data",
        "scripted-parts",
        tmp_path / "p.jsonl",
        "-n",
        1,
        "-k",
        1,
    )
    (final,) = assistant_messages(rollouts[0])
    assert final["content"] == [
        {"type": "text", "text": "<answer>"},
        {"type": "text", "text": "42</answer>"},
    ]


def test_scripted_multi_turn_calculator_with_reasoning_and_parts(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    target, data = CALCULATOR
    rollouts = run(
        litellm_proxy, target, data, "scripted-calc", tmp_path / "sc.jsonl", "-n", 3, "-k", 2
    )
    assert len(rollouts) == 6
    assert {r["termination_reason"] for r in rollouts} == {"finished"}
    assert all(r["rewards"] == {"correct": 1.0, "used_tools": 1.0} for r in rollouts)
    first = rollouts[0]
    assert [m["role"] for m in first["transcript"]] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip
    tools = [m["content"] for m in first["transcript"] if m["role"] == "tool"]
    assert tools == ['{"result":85}', '{"result":850}']  # (29 + 56) * 10
    final = assistant_messages(first)[-1]["content"]
    assert final[-1] == {"type": "text", "text": "The result is <answer>850</answer>."}


def test_reasoning_fields_are_kept_in_the_transcript(litellm_proxy: Any, tmp_path: Path) -> None:
    """beyond.md §7: ``reasoning_content`` / ``reasoning`` stay in the results transcript."""
    target, data = CALCULATOR
    rollouts = run(
        litellm_proxy, target, data, "scripted-calc", tmp_path / "rf.jsonl", "-n", 1, "-k", 1
    )
    first, second, final = assistant_messages(rollouts[0])
    assert first["reasoning_content"] == "Add first."
    assert second["reasoning_content"] == "The sum is 85."
    assert final["reasoning"] == "The product is 850."
    rollouts = run(
        litellm_proxy,
        ANSWER_ENV,
        HERE / "data",
        "scripted-parts",
        tmp_path / "rp.jsonl",
        "-n",
        1,
        "-k",
        1,
    )
    assert assistant_messages(rollouts[0])[0]["reasoning_content"] == "It is 42."


def test_token_usage_reported_by_the_proxy_is_recorded(litellm_proxy: Any, tmp_path: Path) -> None:
    """COMMON agreement: usage summed over the rollout's calls, reasoning tokens included."""
    target, data = CALCULATOR
    rollouts = run(
        litellm_proxy, target, data, "scripted-calc", tmp_path / "u.jsonl", "-n", 1, "-k", 1
    )
    usage = rollouts[0]["usage"]
    assert usage["prompt_tokens"] == 33 and usage["completion_tokens"] == 21
    assert usage["total_tokens"] == 54 and usage["reasoning_tokens"] == 9


def test_reasoning_is_not_sent_back_unless_the_environment_opts_in(
    litellm_proxy: Any, tmp_path: Path
) -> None:
    """beyond.md §7: ``send_reasoning`` defaults to off; on, a DeepSeek-like server is served.

    ``scripted-calc`` answers 400 when reasoning comes back; ``scripted-calc-strict`` answers
    400 unless it does (like DeepSeek's thinking mode with tools).
    """
    target, data = CALCULATOR
    default = run(
        litellm_proxy, target, data, "scripted-calc", tmp_path / "d.jsonl", "-n", 1, "-k", 1
    )
    assert default[0]["termination_reason"] == "finished"
    strict = run(
        litellm_proxy, target, data, "scripted-calc-strict", tmp_path / "s.jsonl", "-n", 1, "-k", 1,
        all_fail=True,
    )  # fmt: skip
    assert strict[0]["termination_reason"] == "model_error"
    assert len(assistant_messages(strict[0])) == 1  # the second turn was refused
    opted_in = run(
        litellm_proxy, target, data, "scripted-calc-strict", tmp_path / "o.jsonl",
        "-n", 1, "-k", 1, "--env-arg", "send_reasoning=true",
    )  # fmt: skip
    assert opted_in[0]["termination_reason"] == "finished"
    assert opted_in[0]["rewards"] == {"correct": 1.0, "used_tools": 1.0}
