"""Credentials reach the Ray workers as run-time values, never the bundle, results or logs."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner
from tests.cli.conftest import ThreadedServer
from tests.ray.ray_envs import TellingEnv
from tests.runner.sample_envs import number_config

from benchmax.auth import StaticBearerAuth
from benchmax.bundle import dump_bundle
from benchmax.cli import cli
from benchmax.results import read_results
from benchmax.runner import RayExecutor, run_environment

pytestmark = pytest.mark.ray

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_model_and_judge_keys_reach_the_workers_and_stay_out_of_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_cluster: ModuleType
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from rubric_judge.policy import respond

    output = tmp_path / "judge.jsonl"
    with ThreadedServer(respond) as server:
        args = [
            "run", f"{EXAMPLES}/rubric_judge/env.py:RubricJudgeEnv", "--data",
            str(EXAMPLES / "rubric_judge"), "-n", "3", "-k", "2", "--base-url", server.base_url,
            "--model", "policy-model", "--api-key-env", "POLICY_KEY", "--env-arg",
            f"judge_base_url={server.base_url}", "--auth", "judge=JUDGE_KEY_VARIABLE",
            "-o", str(output), "--ray", "--ray-workers", "2", "--no-model-check",
        ]  # fmt: skip
        keys = {"JUDGE_KEY_VARIABLE": "judge-secret-value", "POLICY_KEY": "policy-secret-key"}
        result = CliRunner().invoke(cli, args, env=keys)
        requests = server.requests
    assert result.exit_code == 0, result.output
    judge_calls = [r for r in requests if (r.body or {}).get("model") == "mock-judge"]
    policy_calls = [r for r in requests if (r.body or {}).get("model") == "policy-model"]
    assert len(judge_calls) == 3 * 2 * 3  # examples x rollouts x rubrics, all from workers
    assert {r.headers.get("authorization") for r in judge_calls} == {"Bearer judge-secret-value"}
    assert {r.headers.get("authorization") for r in policy_calls} == {"Bearer policy-secret-key"}
    text = output.read_text() + output.with_name("judge.report.json").read_text()
    assert "secret" not in text
    assert "secret" not in result.output


async def test_a_key_a_worker_logs_is_masked_in_the_results(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    secret = "sk-worker-visible-0123456789"
    config = number_config(tmp_path, model_auth=StaticBearerAuth(secret), group_size=2)
    bundle = dump_bundle(TellingEnv)
    assert secret.encode() not in bundle.pickled + bundle.metadata.to_json_bytes()
    executor = RayExecutor(workers=1, bundle=bundle, constructor_args={"count": 3})
    await run_environment(TellingEnv(3), config, executor=executor)
    rollouts = read_results(config.output).rollouts
    messages = [entry["message"] for r in rollouts for entry in r.logs]
    assert sorted(messages) == sorted(
        f"rollout {k} sees key ***" for _ in range(3) for k in range(2)
    )
    assert all(entry["logger"] == "tests.ray.envs" for r in rollouts for entry in r.logs)
    assert secret not in config.output.read_text()


def test_a_key_user_code_prints_on_a_worker_is_masked_in_the_ray_session_logs(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    from tests.cli.test_secrets_in_output import ENV_SOURCE, MCP_PASSWORD, MCP_URL, POLICY_KEY

    # The session's Ray workers started before this test, without POLICY_KEY in their
    # environment: the user code on the worker reads the same key from a file instead.
    key_file = tmp_path / "policy.key"
    key_file.write_text(POLICY_KEY)
    reads_key_file = f"Path({str(key_file)!r}).read_text()"
    assert 'os.environ["POLICY_KEY"]' in ENV_SOURCE
    (tmp_path / "chatty_env.py").write_text(
        ENV_SOURCE.replace('os.environ["POLICY_KEY"]', reads_key_file)
    )
    output = tmp_path / "chatty.jsonl"
    with ThreadedServer(respond_ok) as server:
        args = [
            "run", f"{tmp_path / 'chatty_env.py'}:ChattyEnv", "--data", str(tmp_path),
            "--base-url", server.base_url, "--model", "m", "--api-key-env", "POLICY_KEY",
            "--env-arg", f"mcp_url={MCP_URL}", "-k", "2", "-o", str(output),
            "--ray", "--ray-workers", "1", "--no-model-check",
        ]  # fmt: skip
        result = CliRunner().invoke(cli, args, env={"POLICY_KEY": POLICY_KEY})
    assert result.exit_code == 0, result.output
    session = Path("/tmp/ray/session_latest")  # the local cluster's session (default temp dir)
    logs = [p for p in (session / "logs").glob("worker-*") if p.suffix in (".out", ".err")]
    texts = "\n".join(p.read_text(errors="replace") for p in logs)
    assert "user code sees key *** and url https://tools:***@127.0.0.1:9/mcp" in texts
    assert "stderr sees key ***" in texts
    for secret in (POLICY_KEY, MCP_PASSWORD):
        assert secret not in texts
        assert secret not in result.output
        assert secret not in output.read_text()


def respond_ok(body: dict, recorded: object) -> str:
    return "ok"
