"""Every run behaviour against a real vLLM (CPU build) serving SmolLM2-135M-Instruct.

A 135M model answers badly; these checks test benchmax, not the model: the ids benchmax
records are the server's own, ``tool_choice: required`` forces the tool calls a multi-turn
rollout needs, and overflow, output cuts, seeds and judging settle as documented.
Run with ``bash .ci/real-servers vllm`` (installs vLLM in its own environment first).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.real_servers._recording import RecordingProxy
from tests.real_servers._servers import RunningServer
from tests.real_servers.support import (
    QUICKSTART,
    STRICT_CALCULATOR,
    assert_same_tokens,
    benchmax_run,
    one_line_error,
    prefix_breaks,
    raw_tokens,
    recorded_tokens,
    token_calls,
    trajectories,
    write_rows,
)

from benchmax.training import to_training_samples

pytestmark = pytest.mark.vllm


@pytest.fixture
def proxy(vllm: RunningServer) -> Any:
    with RecordingProxy(vllm.root) as recording:
        yield recording


def tokenize(vllm: RunningServer, body: dict[str, Any]) -> list[int]:
    """The server's own tokenization of a chat request's rendered prompt."""
    request: dict[str, Any] = {"model": vllm.model, "messages": body["messages"]}
    if body.get("tools"):
        request["tools"] = body["tools"]
    request["add_generation_prompt"] = True
    answer = httpx.post(f"{vllm.root}/tokenize", json=request, timeout=600)
    answer.raise_for_status()
    tokens: list[int] = answer.json()["tokens"]
    return tokens


def test_tokens_run_records_the_servers_own_ids(
    vllm: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    output = tmp_path / "tokens.jsonl"
    done = benchmax_run(
        proxy.base_url, vllm.model, *QUICKSTART, "--split", "train", "-n", 3, "-k", 2,
        "--tokens", "--temperature", 0.7, "--seed", 5, "--max-tokens", 48, "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    preflight, *rollouts = proxy.chat()
    assert preflight.body["max_tokens"] == 16 and len(rollouts) == 6
    raw = [raw_tokens(exchange.reply) for exchange in rollouts]
    recorded = [recorded_tokens(call) for t in trajectories(output) for call in t.model_calls]
    assert_same_tokens(recorded, raw)
    for exchange in rollouts:
        assert list(exchange.reply["prompt_token_ids"]) == tokenize(vllm, exchange.body)
    for trajectory in trajectories(output):
        assert trajectory.termination_reason in {"finished", "output_exceeded"}
        (call,) = trajectory.model_calls
        assert call.completion_token_ids is not None
        assert call.completion_token_ids[-1] == 2 or call.finish_reason == "length"


def test_required_tool_choice_multi_turn_counts_every_prefix_break(
    vllm: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    """vLLM re-renders the tool calls it parsed, so a call's prompt need not extend the
    previous prompt + completion (the template's whitespace and key order are not the
    model's): every such break is counted and starts a new training sample, never stitched."""
    output = tmp_path / "tools.jsonl"
    done = benchmax_run(
        proxy.base_url, vllm.model, *STRICT_CALCULATOR, "--split", "eval", "-n", 2, "-k", 2,
        "--tokens", "--sampling-arg", "tool_choice=required", "--temperature", 0.7,
        "--seed", 3, "--max-tokens", 96, "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    preflight, *rollouts = proxy.chat()
    assert "tool_choice" not in preflight.body and "tools" not in preflight.body
    assert all(e.body["tool_choice"] == "required" and e.body["tools"] for e in rollouts)
    for exchange in rollouts:
        assert list(exchange.reply["prompt_token_ids"]) == tokenize(vllm, exchange.body)
        for message in exchange.body["messages"]:
            if message["role"] == "assistant" and message.get("tool_calls"):
                assert message["content"] is not None  # sent as "" where vLLM sent null
    multi_turn = 0
    for trajectory in trajectories(output):
        assert trajectory.termination_reason in {"max_turns_exceeded", "output_exceeded"}
        calls = token_calls(trajectory)
        assert len(calls) == len(trajectory.model_calls)
        breaks = prefix_breaks(calls)
        assert trajectory.token_prefix_breaks == breaks
        assert len(to_training_samples(trajectory)) == breaks + 1
        assistant = [m for m in trajectory.messages or () if m["role"] == "assistant"]
        tools = [m for m in trajectory.messages or () if m["role"] == "tool"]
        if trajectory.termination_reason == "max_turns_exceeded":
            assert len(assistant) == 4 and all(m.get("tool_calls") for m in assistant)
            assert len(tools) >= 4
            multi_turn += 1
    assert multi_turn >= 1


def test_overflow_is_context_exceeded_and_a_window_cut_is_output_exceeded(
    vllm: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    """A prompt over the 2,048-token window is refused (400) -> ``context_exceeded``; a
    prompt that fits with ``max_tokens`` past the window is not refused: vLLM generates up
    to the window and stops with ``length`` -> ``output_exceeded`` (``ignore_eos``, a vLLM
    sampling arg, keeps the model from stopping sooner)."""
    rows = [
        {"prompt": "word " * 2100 + "How many words?", "ground_truth": "2100"},
        {"prompt": "word " * 1900 + "How many words?", "ground_truth": "1900"},
    ]
    data = write_rows(tmp_path / "data", "eval", rows)
    output = tmp_path / "overflow.jsonl"
    done = benchmax_run(
        proxy.base_url, vllm.model, QUICKSTART[0], "--data", data, "--split", "eval",
        "-k", 1, "--max-tokens", 1000, "--temperature", 0, "--sampling-arg", "ignore_eos=true",
        "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reasons = {t.example_index: t.termination_reason for t in trajectories(output)}
    assert reasons == {0: "context_exceeded", 1: "output_exceeded"}
    refused = [e for e in proxy.chat() if e.status == 400]
    (overflow,) = refused
    assert "maximum context length is 2048 tokens" in overflow.reply["error"]["message"]
    (fitted,) = [e for e in proxy.chat() if e.status == 200]
    usage = fitted.reply["usage"]
    assert fitted.reply["choices"][0]["finish_reason"] == "length"
    assert usage["prompt_tokens"] + usage["completion_tokens"] == 2048


def test_a_max_tokens_cut_is_output_exceeded(
    vllm: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    output = tmp_path / "cut.jsonl"
    done = benchmax_run(
        proxy.base_url, vllm.model, *QUICKSTART, "--split", "train", "-n", 2, "-k", 1,
        "--max-tokens", 2, "--temperature", 0, "-o", output,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert {t.termination_reason for t in trajectories(output)} == {"output_exceeded"}
    assert all(t.rewards == {"correct": 0.0} for t in trajectories(output))


def test_seeds_reproduce_across_runs_and_differ_within_a_group(
    vllm: RunningServer, tmp_path: Path
) -> None:
    texts: list[dict[tuple[str, int], str]] = []
    for name in ("first", "second"):
        output = tmp_path / f"{name}.jsonl"
        done = benchmax_run(
            vllm.base_url, vllm.model, *QUICKSTART, "--split", "train", "-n", 2, "-k", 3,
            "--temperature", 1.0, "--seed", 11, "--max-tokens", 24, "-o", output,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        texts.append(
            {
                (t.example_id, t.group_index): json.dumps((t.messages or ())[-1]["content"])
                for t in trajectories(output)
            }
        )
    assert texts[0] == texts[1] and len(texts[0]) == 6
    groups = collections.defaultdict(set)
    for (example_id, _), text in texts[0].items():
        groups[example_id].add(text)
    assert all(len(group) > 1 for group in groups.values()), groups


def test_n_other_than_one_is_refused_before_any_call(
    vllm: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    done = benchmax_run(
        proxy.base_url, vllm.model, *QUICKSTART, "--split", "train", "-n", 1,
        "--sampling-arg", "n=2", "-o", tmp_path / "n.jsonl",
    )  # fmt: skip
    assert "sampling_args['n'] must be 1, got 2" in one_line_error(done)
    assert proxy.chat() == []


UNHURRIED_JUDGE_ENV = f"""
import dataclasses
import sys

sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / "examples")!r})
from rubric_judge.env import RubricJudgeEnv


class UnhurriedJudgeEnv(RubricJudgeEnv):
    \"\"\"The rubric-judge example with no per-attempt judge timeout.\"\"\"

    def __init__(self, **arguments):
        super().__init__(**arguments)
        self.judge = dataclasses.replace(self.judge, timeout=None)
"""


def test_the_judge_path_against_the_same_server(
    vllm: RunningServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    """The rubric-judge example with the judge on the same vLLM: one judge request per
    rubric for every rollout that finished, each scored (rewards 0/1) or settled as
    ``judge_error`` (a 135M judge often writes no valid verdict) with zero rewards. A stop
    sequence makes the policy's answers finish (a cut answer is never judged).

    The example's judge keeps 0.2's 60 s per attempt, which a CPU vLLM on a busy 2-core
    machine can exceed (a 135M judge may write ~1,900 tokens); the run here lifts it, and
    the runner's judge hook deadline (900 s) still bounds each attempt."""
    output = tmp_path / "judged.jsonl"
    (tmp_path / "unhurried_judge.py").write_text(UNHURRIED_JUDGE_ENV)
    done = benchmax_run(
        proxy.base_url, vllm.model, f"{tmp_path / 'unhurried_judge.py'}:UnhurriedJudgeEnv",
        "--data", "examples/rubric_judge", "-n", 3, "-k", 1, "--max-tokens", 64,
        "--sampling-arg", 'stop=["\\n", "."]',
        "--env-arg", f"judge_base_url={proxy.base_url}", "--env-arg", f"judge_model={vllm.model}",
        "--auth", "judge=JUDGE_KEY", "-o", output, env={"JUDGE_KEY": "sk-unused"},
    )  # fmt: skip
    reasons = [t.termination_reason for t in trajectories(output)]
    assert len(reasons) == 3, done.stdout + done.stderr
    # A run in which every rollout failed (here: every verdict unreadable) exits non-zero.
    assert (done.returncode != 0) == (set(reasons) == {"judge_error"}), done.stdout
    judged = [e for e in proxy.chat() if "stop" not in e.body]
    assert all(e.status == 200 and e.body["temperature"] == 0.0 for e in judged)
    settled = {"finished": 0, "judge_error": 0}
    for trajectory in trajectories(output):
        reason = trajectory.termination_reason
        assert reason in {"finished", "judge_error", "output_exceeded"}, trajectory.logs
        assert set(trajectory.rewards.values()) <= {0.0, 1.0}
        if reason == "judge_error":
            assert set(trajectory.rewards.values()) == {0.0}
        if reason in settled:
            settled[reason] += 1
    assert sum(settled.values()) >= 1, [t.termination_reason for t in trajectories(output)]
    assert len(judged) >= 3 * settled["finished"] + settled["judge_error"] > 0
