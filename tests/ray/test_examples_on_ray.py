"""Every example gives the same lines on Ray workers as in this process (`benchmax run --ray`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

from benchmax.cli import cli
from benchmax.results import read_results

pytestmark = pytest.mark.ray

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = {
    "quickstart": ("QuickStartEnv", "reply", []),
    "exact_match": ("ExactMatchEnv", "answer", []),
    "calculator": ("CalculatorEnv", "solve", []),
    "rubric_judge": (
        "RubricJudgeEnv",
        "respond",
        ["--env-arg", "judge_base_url=@mock", "--auth", "judge=BENCHMAX_TEST_UNSET_JUDGE_KEY"],
    ),
}


def run(name: str, output: Path, *extra: str) -> str:
    target, policy, options = CASES[name]
    args = [
        "run", f"{EXAMPLES / name}/env.py:{target}", "--data", str(EXAMPLES / name),
        "--mock-policy", f"{EXAMPLES / name}/policy.py:{policy}", "-n", "10", "-k", "3",
        "-o", str(output), *options, *extra,
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.output


ROLLOUT_ID = re.compile(r"[\w-]+\.e(\d+)\.a(\d+)-[0-9a-f]{4}\.r(\d+)")
TOOL_CALL_ID = re.compile(r"call_mock_\d+")  # the mock server's counter: order-dependent


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A rollout line without what differs between any two runs (ids, times)."""
    kept = {k: v for k, v in record.items() if k not in ("run_id", "rollout_id", "timings")}
    kept["logs"] = [{k: v for k, v in entry.items() if k != "time"} for entry in record["logs"]]
    for calls in ("model_calls", "tool_calls"):  # how long each call took differs too
        kept[calls] = [
            {k: v for k, v in c.items() if k != "seconds"} for c in kept.get(calls) or []
        ]
    text = ROLLOUT_ID.sub(r"e\1.a\2.r\3", json.dumps(kept, sort_keys=True))
    return json.loads(TOOL_CALL_ID.sub("call_mock_N", text))


def lines(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    return sorted(rows, key=lambda r: (r["example_index"], r["group_index"]))


@pytest.mark.parametrize("name", list(CASES))
def test_example_on_ray_writes_the_lines_of_a_local_run(
    name: str, tmp_path: Path, ray_cluster: ModuleType
) -> None:
    local, remote = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    run(name, local)
    output = run(name, remote, "--ray", "--ray-workers", "2", "--ray-worker-concurrency", "2")
    assert "groups run on Ray workers" in output
    assert read_results(remote).header["definition"] == read_results(local).header["definition"]
    local_lines, remote_lines = lines(local), lines(remote)
    assert len(remote_lines) == 10 * 3
    assert [comparable(r) for r in remote_lines] == [comparable(r) for r in local_lines]
    rewards = {(r["example_id"], r["group_index"]): r["rewards"] for r in remote_lines}
    assert len({json.dumps(v, sort_keys=True) for v in rewards.values()}) > 1  # a real spread
    remote_report = json.loads(remote.with_name("ray.report.json").read_text())
    local_report = json.loads(local.with_name("local.report.json").read_text())
    for key in ("groups", "rollouts", "rollouts_by_reason", "reward_stats"):
        assert remote_report[key] == local_report[key], key
    if name == "calculator":  # what BaseEnv reports, and attributed logs, came back
        assert all(r["transcript"] and "tool_seconds" in r["timings"] for r in remote_lines)
        assert any("max_turns_exceeded" in e["message"] for r in remote_lines for e in r["logs"])


def test_a_bundle_target_runs_on_ray_as_it_is_with_its_mock_arguments(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    """The bundle file travels as is; its stored ``@mock`` argument reaches the workers
    as the embedded server's URL (a run-time value, not a change to the bundle)."""
    bundle = tmp_path / "judge.bundle"
    target = f"{EXAMPLES}/rubric_judge/env.py:RubricJudgeEnv"
    arguments = ["bundle", target, "--env-arg", "judge_base_url=@mock", "-o", str(bundle)]
    made = CliRunner().invoke(cli, arguments)
    assert made.exit_code == 0, made.output
    outputs = {}
    for label, extra in (("local", []), ("ray", ["--ray", "--ray-workers", "1"])):
        outputs[label] = tmp_path / f"{label}.jsonl"
        args = [
            "run", str(bundle), "--data", str(EXAMPLES / "rubric_judge"), "--mock-policy",
            f"{EXAMPLES}/rubric_judge/policy.py:respond", "-n", "4", "-k", "2",
            "-o", str(outputs[label]), *extra,
        ]  # fmt: skip
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    local, remote = lines(outputs["local"]), lines(outputs["ray"])
    assert {r["termination_reason"] for r in remote} == {"finished"}
    assert [comparable(r) for r in remote] == [comparable(r) for r in local]
    definition = read_results(outputs["ray"]).header["definition"]
    assert set(definition["env"]) == {"bundle_digest"}
