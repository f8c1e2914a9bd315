"""``benchmax traces`` on the sample logs, and its ``--baseline`` read by ``compare``/``view``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.cli.conftest import ThreadedServer

from benchmax.cli import cli
from benchmax.results import read_results
from benchmax.testing import RecordedRequest

SAMPLES = Path(__file__).parent / "trace_samples"
LOG_FILES = ("finetune.jsonl", "gateway.jsonl", "litellm_proxy.jsonl", "otel_export.json")

ENV_SOURCE = '''
from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, Example, JsonlDataset, canonical_example_id
from benchmax.rewards import extract_completion_text


class LoggedEnv(BaseEnv):
    """Rows as `benchmax traces` writes them; rewards the reply equal to the ground truth."""

    reward_keys = ("exact", "length_ok")
    max_turns = 1

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=self._example,
                            max_examples=max_examples)

    def _example(self, row):
        history = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
        payload = {"prompt_messages": history, "ground_truth": row["ground_truth"]}
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        return {
            "exact": float(text == rollout.example_args["ground_truth"]),
            "length_ok": float(len(text) < 80),
        }
'''


def invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "logs").mkdir()
    for name in LOG_FILES:
        shutil.copy(SAMPLES / name, tmp_path / "logs" / name)
    (tmp_path / "env.py").write_text(ENV_SOURCE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_command_writes_the_split_and_lists_malformed_lines(project: Path) -> None:
    result = invoke("traces", "logs", "-o", "data", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "traces summary" in result.output
    assert "logs/gateway.jsonl:4: not JSON" in result.output
    assert "logs/litellm_proxy.jsonl:6: not JSON" in result.output
    assert "dropped: failed_call" in result.output and "scrubbed: api_key" in result.output
    assert (project / "data" / "train.jsonl").is_file() and (
        project / "data" / "eval.jsonl"
    ).is_file()


def test_strict_exits_1_naming_the_first_malformed_line(project: Path) -> None:
    result = invoke("traces", "logs/gateway.jsonl", "-o", "data", "--strict")
    assert result.exit_code == 3
    assert "Error: logs/gateway.jsonl:4: not JSON" in result.output
    assert not (project / "data" / "train.jsonl").exists()


def test_a_missing_input_is_one_error_line(project: Path) -> None:
    result = invoke("traces", "logs/nowhere.jsonl", "-o", "data")
    assert result.exit_code == 3
    assert result.output.strip() == "Error: input not found: logs/nowhere.jsonl"


def test_an_unknown_file_is_refused_by_name(project: Path) -> None:
    shutil.copy(SAMPLES / "access.jsonl", project / "logs" / "access.jsonl")
    result = invoke("traces", "logs", "-o", "data")
    assert result.exit_code == 3
    assert "access.jsonl is not in a known trace format" in result.output


def test_a_teacher_echoing_its_key_never_writes_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-1234567890-teacher"
    monkeypatch.setenv("BENCHMAX_TEST_TEACHER_KEY", secret)

    def teacher(body: dict, request: RecordedRequest) -> str:
        said = request.headers.get("authorization", "")
        return json.dumps({"reply": f"reference answer ({said})"})

    with ThreadedServer(teacher) as server:
        result = invoke(
            "traces", "logs", "-o", "data", "--teacher-model", "t",
            "--teacher-base-url", server.base_url,
            "--teacher-api-key-env", "BENCHMAX_TEST_TEACHER_KEY",
        )  # fmt: skip
        assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {secret}"}
    assert result.exit_code == 0, result.output
    rows = [
        json.loads(line)
        for name in ("train.jsonl", "eval.jsonl")
        for line in (project / "data" / name).read_text().splitlines()
    ]
    assert rows and {row["ground_truth"] for row in rows} == {"reference answer (Bearer ***)"}
    written = "".join(p.read_text() for p in (project / "data").rglob("*") if p.is_file())
    assert secret not in written + result.output


def test_a_wrong_baseline_target_stops_before_anything_is_written(project: Path) -> None:
    result = invoke("traces", "logs", "-o", "data", "--baseline", "missing_env.py:LoggedEnv")
    assert result.exit_code == 3
    assert "Error: no such file:" in result.output and "missing_env.py" in result.output
    assert not (project / "data").exists()
    unset = invoke(
        "traces", "logs", "-o", "data", "--baseline", "env.py:LoggedEnv",
        "--auth", "judge=BENCHMAX_TEST_UNSET_VARIABLE",
    )  # fmt: skip
    assert unset.exit_code == 3 and "BENCHMAX_TEST_UNSET_VARIABLE" in unset.output
    assert not (project / "data").exists()


def test_teacher_options_go_together(project: Path) -> None:
    result = invoke("traces", "logs", "-o", "data", "--teacher-model", "t")
    assert result.exit_code == 2 and "go together" in result.output


def test_the_baseline_is_a_results_file_that_compare_and_view_read(project: Path) -> None:
    result = invoke("traces", "logs", "-o", "data", "--eval-fraction", "0.5",
                    "--baseline", "env.py:LoggedEnv")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "baseline: logged" in result.output
    baseline = read_results(project / "data" / "baseline.jsonl")
    evaluation = [json.loads(line) for line in (project / "data" / "eval.jsonl").open()]
    assert len(baseline.rollouts) == len(evaluation) > 0
    assert all(r.rewards["exact"] == 1.0 for r in baseline.rollouts)  # the logged replies
    assert baseline.definition["split"] == "eval" and baseline.definition["group_size"] == 1
    assert baseline.definition["env"]["class"].endswith("LoggedEnv")
    logged_models = {row["source"].get("model") for row in evaluation} - {None}
    assert set(baseline.definition["model"].split(",")) == logged_models
    assert (baseline.rollouts[0].messages or ())[-1]["role"] == "assistant"

    run = invoke(
        "run",
        "env.py:LoggedEnv",
        "--data",
        "data",
        "--split",
        "eval",
        "--group-size",
        "1",
        "-o",
        "trained.jsonl",
    )  # fmt: skip  (echo mock policy)
    assert run.exit_code == 0, run.output
    compared = invoke("compare", "data/baseline.jsonl", "trained.jsonl")
    assert compared.exit_code == 0, compared.output
    assert f"matched {len(evaluation)} examples by id" in compared.output
    assert "exact" in compared.output and "-1.000" in compared.output
    view = invoke("view", "data/baseline.jsonl")
    assert view.exit_code == 0, view.output
    assert (project / "data" / "baseline.html").is_file()


def test_a_baseline_whose_env_reads_other_rows_is_refused(project: Path) -> None:
    (project / "other.py").write_text(
        ENV_SOURCE.replace('base_dir / f"{split}.jsonl"', 'base_dir / "train.jsonl"')
    )
    result = invoke("traces", "logs", "-o", "data", "--baseline", "other.py:LoggedEnv")
    assert result.exit_code == 3
    assert "--baseline:" in result.output and "paired in order" in result.output


def test_an_empty_eval_split_is_explained(project: Path) -> None:
    result = invoke("traces", "logs/gateway.jsonl", "-o", "data")  # one conversation
    assert result.exit_code == 0, result.output
    assert "eval.jsonl is empty" in " ".join(result.output.split())


JUDGED_ENV_SOURCE = '''
from pathlib import Path

from benchmax.auth import InjectedAuth
from benchmax.envs import BaseEnv, BaseRollout, Example, JsonlDataset, canonical_example_id
from benchmax.rewards import Judge, Rubric, score_rubrics

RUBRICS = [Rubric("Brevity", "The response is short.")]


class JudgedEnv(BaseEnv):
    """Rows as `benchmax traces` writes them; a judge grades the reply's brevity."""

    reward_keys = ("rubric_brevity",)
    max_turns = 1

    def __init__(self, *, judge_base_url: str) -> None:
        super().__init__()
        self.judge = Judge(model="judge", base_url=judge_base_url, auth=InjectedAuth("judge"))

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=self._example,
                            max_examples=max_examples)

    def _example(self, row):
        history = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
        payload = {"prompt_messages": history, "ground_truth": row["ground_truth"]}
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        asked = [m for m in rollout.messages if m["role"] == "user"]
        return await score_rubrics(rollout.rollout_id, rollout.messages, rubrics=RUBRICS,
                                   judge=self.judge, question=str(asked[-1]["content"]),
                                   ground_truth=rollout.example_args["ground_truth"])
'''

JUDGE_POLICY_SOURCE = """
import json

from benchmax.testing import message_text


def grade(body, request):
    prompt = message_text(body["messages"][-1]["content"])
    assert "Criterion title:" in prompt, "only the judge is asked"
    assert request.headers.get("authorization") == "Bearer benchmax-mock-key"
    return json.dumps({"score": 1, "reasoning": "short enough"})
"""


def test_a_baseline_judged_on_the_embedded_mock(project: Path) -> None:
    (project / "judged.py").write_text(JUDGED_ENV_SOURCE)
    (project / "judge_policy.py").write_text(JUDGE_POLICY_SOURCE)
    result = invoke("traces", "logs", "-o", "data", "--eval-fraction", "0.5",
                    "--baseline", "judged.py:JudgedEnv", "--env-arg", "judge_base_url=@mock",
                    "--mock-policy", "judge_policy.py:grade")  # fmt: skip
    assert result.exit_code == 0, result.output
    baseline = read_results(project / "data" / "baseline.jsonl")
    assert baseline.rollouts and all(
        r.termination_reason == "finished" and r.rewards == {"rubric_brevity": 1.0}
        for r in baseline.rollouts
    )
    # The header keeps '@mock', never the mock's address of the moment.
    assert baseline.definition["env"]["constructor_args"] == {"judge_base_url": "@mock"}


def test_mock_policy_without_a_baseline_or_an_at_mock_argument_is_refused(project: Path) -> None:
    result = invoke("traces", "logs", "-o", "data", "--mock-policy", "echo")
    assert result.exit_code != 0 and "--mock-policy needs --baseline" in result.output
    result = invoke("traces", "logs", "-o", "data", "--eval-fraction", "0.5",
                    "--baseline", "env.py:LoggedEnv", "--mock-policy", "echo")  # fmt: skip
    assert result.exit_code == 3
    assert "no '@mock' constructor argument" in result.output


def test_a_teacher_with_a_password_in_its_url_is_reached_and_never_written(
    project: Path,
) -> None:
    """The README's alternative to --teacher-api-key-env: ``user:PASSWORD@`` in the URL,
    sent as HTTP Basic (issue 28 kind 7)."""
    import base64

    password = "teacher-pass@5150"
    basic = "Basic " + base64.b64encode(f"t:{password}".encode()).decode()

    def teacher(body: dict, request: RecordedRequest) -> str:
        return json.dumps({"reply": f"reference answer ({request.headers.get('authorization')})"})

    with ThreadedServer(teacher) as server:
        url = server.base_url.replace("://", "://t:teacher-pass%405150@", 1)
        result = invoke(
            "traces", "logs", "-o", "data", "--teacher-model", "t", "--teacher-base-url", url
        )
        assert {r.headers["authorization"] for r in server.requests} == {basic}
    assert result.exit_code == 0, result.output
    rows = [
        json.loads(line)
        for name in ("train.jsonl", "eval.jsonl")
        for line in (project / "data" / name).read_text().splitlines()
    ]
    # The teacher echoed the header it got: the Basic token is masked like a key.
    assert rows and {row["ground_truth"] for row in rows} == {"reference answer (Basic ***)"}
    written = "".join(p.read_text() for p in (project / "data").rglob("*") if p.is_file())
    for secret in (password, "teacher-pass%405150", basic.split()[1]):
        assert secret not in written + result.output


def test_a_teacher_url_password_and_key_variable_are_refused(project: Path) -> None:
    result = invoke(
        "traces", "logs", "-o", "data", "--teacher-model", "t",
        "--teacher-base-url", "http://t:secret-pw-77@127.0.0.1:9/v1",
        "--teacher-api-key-env", "HOME",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "keep the credential in one of them" in result.output
    assert "secret-pw-77" not in result.output
    assert not (project / "data").exists()
