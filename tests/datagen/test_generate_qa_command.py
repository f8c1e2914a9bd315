"""``benchmax generate-qa`` on the example corpus, and a seed-style environment on its output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.cli.conftest import ThreadedServer

from benchmax.cli import cli
from benchmax.datagen import read_corpus

REPO = Path(__file__).resolve().parents[2]
COMMAND = "generate-qa examples/corpus -o qa --mock-policy examples/corpus/policy.py:reply"


def invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the examples to run the README's commands in (outputs land in tmp_path)."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_documented_command_runs_offline_and_its_output_trains_an_env(project: Path) -> None:
    result = invoke(*COMMAND.split())
    assert result.exit_code == 0, result.output
    assert "mock model wrote these pairs" in result.output
    train, evaluation = rows(project / "qa" / "train.jsonl"), rows(project / "qa" / "eval.jsonl")
    assert len(train) >= 10 and len(evaluation) >= 3
    assert {"prompt", "ground_truth", "type", "style", "noise", "source"} <= set(train[0])
    assert not {r["source"]["file"] for r in train if "line" not in r["source"]} & {
        r["source"]["file"] for r in evaluation if "line" not in r["source"]
    }
    documents = {(r["source"]["file"], r["source"].get("line")) for r in train}
    assert not documents & {(r["source"]["file"], r["source"].get("line")) for r in evaluation}
    assert "duplicate_question" in result.output  # overlapping chunks repeat a fact
    assert "retried after a bad reply" in result.output

    output = project / "run.jsonl"
    run = invoke(
        "run", "examples/qa/env.py:CorpusQAEnv", "--data", "qa", "--split", "train",
        "--mock-policy", "examples/qa/policy.py:answer", "-o", output,
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    report = json.loads((project / "run.report.json").read_text())
    assert report["groups"] == len(train)
    assert report["rollouts_by_reason"] == {"finished": 4 * len(train)}
    assert 0.2 < report["reward_stats"]["correct"]["mean"] < 0.9

    validate = invoke(
        "validate", "examples/qa/env.py:CorpusQAEnv", "--data", "qa",
        "--mock-policy", "examples/qa/policy.py:answer", "--no-fresh-interpreter",
    )  # fmt: skip
    assert validate.exit_code == 0, validate.output


def test_the_command_line_itself_in_a_fresh_process(project: Path) -> None:
    argv = [sys.executable, "-m", "benchmax.cli", *COMMAND.split()]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert first.returncode == 0, first.stderr
    produced = (project / "qa" / "train.jsonl").read_bytes()
    second = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == 0, second.stderr
    assert "from an earlier run" in second.stdout
    assert (project / "qa" / "train.jsonl").read_bytes() == produced


def test_a_real_endpoint_gets_the_model_and_the_key(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmax.testing import load_policy

    reply = load_policy("examples/corpus/policy.py:reply")
    monkeypatch.setenv("BENCHMAX_TEST_QA_KEY", "sk-qa-secret")
    with ThreadedServer(reply) as server:
        result = invoke(
            "generate-qa", "examples/corpus", "-o", "out", "--base-url", server.base_url,
            "--model", "writer-1", "--api-key-env", "BENCHMAX_TEST_QA_KEY", "--concurrency", "2",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert {r.body["model"] for r in server.requests} == {"writer-1"}
        assert {r.headers["authorization"] for r in server.requests} == {"Bearer sk-qa-secret"}
    assert "sk-qa-secret" not in result.output
    assert "mock model" not in result.output


def test_a_reply_echoing_the_key_is_masked_in_the_checkpoint_and_the_rows(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmax.testing import load_policy

    writer = load_policy("examples/corpus/policy.py:reply")
    secret = "sk-qa-secret-echoed"

    def echoing(body: dict) -> str:
        pairs = json.loads(writer(body)).get("pairs", []) if "pairs" in writer(body) else []
        for pair in pairs:
            pair["question"] = f"{pair['question']} (key {secret})"
        return json.dumps({"pairs": pairs}) if pairs else writer(body)

    monkeypatch.setenv("BENCHMAX_TEST_QA_KEY", secret)
    with ThreadedServer(echoing) as server:
        result = invoke(
            "generate-qa", "examples/corpus", "-o", "out", "--base-url", server.base_url,
            "--model", "writer-1", "--api-key-env", "BENCHMAX_TEST_QA_KEY",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    cache = (project / "out" / ".generate-qa-cache.jsonl").read_text()
    assert "(key ***)" in cache
    written = "".join(p.read_text() for p in (project / "out").iterdir())
    assert secret not in written + result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["examples/corpus", "-o", "qa"], "give it a question writer with --mock-policy"),
        (["examples/corpus", "-o", "qa", "--base-url", "http://127.0.0.1:9/v1"], "--model"),
        (["missing", "-o", "qa", "--mock-policy", "echo"], "corpus not found: missing"),
        (
            [
                "examples/corpus",
                "-o",
                "qa",
                "--chunk-size",
                "300",
                "--chunk-overlap",
                "300",
                "--mock-policy",
                "echo",
            ],
            "--chunk-overlap (300) must be smaller than --chunk-size (300)",
        ),
        (
            ["examples/corpus", "-o", "qa", "--mock-policy", "echo", "--text-field", "body"],
            "no record has a field 'body'",
        ),
        (
            ["examples/corpus", "-o", "qa", "--mock-policy", "echo", "--types", "trivia=1"],
            "unknown question types 'trivia'",
        ),
        (
            ["examples/corpus", "-o", "qa", "--mock-policy", "echo", "--types", "lookup=x"],
            "'lookup=x' is not NAME=WEIGHT",
        ),
        (
            ["examples/corpus", "-o", "qa", "--mock-policy", "echo", "--styles", "poetic"],
            "styles must be one or more of natural, keyword, expert (unknown: 'poetic')",
        ),
        (
            ["examples/corpus", "-o", "qa", "--mock-policy", "echo", "--noise", "2"],
            "--noise",
        ),
        *(
            (
                ["examples/corpus", "-o", "qa", "--mock-policy", "echo", option, "nan"],
                f"Invalid value for '{option}': 'nan' is not a finite number",
            )
            for option in ("--timeout", "--noise", "--trivial-overlap", "--eval-fraction")
        ),
    ],
)
def test_bad_invocations_are_one_line_errors(project: Path, args: list[str], message: str) -> None:
    result = invoke("generate-qa", *args)
    assert result.exit_code != 0
    assert message in result.output
    assert isinstance(result.exception, SystemExit), result.exception  # no traceback
    assert not (project / "qa" / "train.jsonl").exists()


def test_a_missing_corpus_is_refused_before_any_progress_is_shown(project: Path) -> None:
    result = invoke("generate-qa", "missing", "-o", "qa", "--mock-policy", "echo")
    assert result.exit_code == 3
    assert result.output.strip() == "Error: corpus not found: missing"


def test_failed_requests_exit_non_zero(project: Path) -> None:
    from benchmax.testing import Fault

    with ThreadedServer(lambda body: "{}") as server:
        server.inject(Fault.status(404), times=None)
        result = invoke(
            "generate-qa", "examples/corpus", "-o", "out", "--base-url", server.base_url,
            "--model", "m",
        )  # fmt: skip
    assert result.exit_code == 1
    assert "request failed" in result.output


def test_a_run_that_keeps_no_pair_exits_non_zero_saying_why(project: Path) -> None:
    result = invoke(
        "generate-qa", "examples/corpus", "-o", "out", "--mock-policy",
        "examples/quickstart/policy.py:reply",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "Error: no question-answer pairs were kept: 11 of 11 requests got a bad reply" in (
        " ".join(result.output.split())
    )


def test_links_leading_out_of_the_corpus_are_skipped_and_counted(project: Path) -> None:
    outside = project / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Private\n\nThe vault code is 7731 and nobody knows it.\n")
    (project / "examples" / "corpus" / "leak.md").symlink_to(outside / "secret.md")
    (project / "examples" / "corpus" / "leakdir").symlink_to(outside)
    result = invoke("generate-qa", *COMMAND.split()[1:])
    assert result.exit_code == 0, result.output
    assert re.search(r"links out of the corpus, skipped\s*\S*\s*1", result.output), result.output
    followed = invoke("generate-qa", *COMMAND.split()[1:], "-o", "qa2", "--follow-links-out")
    assert followed.exit_code == 0, followed.output
    assert re.search(r"links out of the corpus, skipped\s*\S*\s*0", followed.output)
    corpus = project / "examples" / "corpus"
    skipped: list[Path] = []
    names = {d.file for d in read_corpus(corpus, skipped_links=skipped)}
    assert "leak.md" not in names and skipped == [corpus / "leak.md"]
    assert not any(name.startswith("leakdir/") for name in names)  # linked dirs: not walked
    followed_names = {d.file for d in read_corpus(corpus, links_out=True)}
    assert "leak.md" in followed_names


def test_every_option_is_documented_in_the_readme() -> None:
    readme = "\n".join(
        p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    )
    command = cli.commands["generate-qa"]
    options = [opt for param in command.params for opt in param.opts if opt.startswith("--")]
    missing = [
        option
        for option in options
        if option not in {"--help"} and f"`{option}" not in readme and f" {option}" not in readme
    ]
    assert missing == []


def test_the_full_mix_runs_offline_and_reports_targets_against_achieved(project: Path) -> None:
    result = invoke(
        *COMMAND.split(), "--types", "lookup=0.5,multi_hop=0.3,reasoning=0.2",
        "--styles", "natural,keyword,expert", "--noise",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "rejected, asked again with the reason" in text
    assert "dropped: trivially_retrievable" in text and "with noise" in text
    for name, target in (("lookup", "50%"), ("multi_hop", "30%"), ("reasoning", "20%")):
        assert re.search(rf"{name} . {target} . \d+% . \d+", text), text
    rows = [json.loads(x) for x in (project / "qa" / "train.jsonl").read_text().splitlines()]
    assert {row["type"] for row in rows} == {"lookup", "multi_hop", "reasoning"}
    assert {row["style"] for row in rows} == {"natural", "keyword", "expert"}
