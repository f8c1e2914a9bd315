"""Issue 28 kind 12, what a newcomer hit: reward means over scored rollouts beside the
failed share; the weighted scalar reward and group advantages in ``run`` and ``view``;
"did you mean" for a wrong class, the expected form for a dotted path; a plain-def
``compute_reward`` named as such; ``validate --local-module``; bundle errors naming the
CLI's flags; the MCP example's README command; ``generate-qa`` on your own text offline."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.cli.conftest import REPO

from benchmax.cli import cli
from benchmax.results import read_results
from benchmax.results._html_report import report_data

QUICKSTART = REPO / "examples" / "quickstart"

ENV_SOURCE = '''
from pathlib import Path

from benchmax.envs import BaseEnv, Dataset, Example, RolloutFailure


class QuarterFailsEnv(BaseEnv):
    """Rollout r3 of every group fails as reward_error; the others score by their index."""

    reward_keys = ("correct", "format")
    reward_weights = {"correct": 1.0, "format": 0.5}
    max_turns = 1

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        prompt = [{"role": "user", "content": "hello"}]
        return Dataset([Example(id=f"e{i}", payload={"prompt_messages": prompt}) for i in range(3)])

    async def compute_reward(self, rollout):
        index = int(rollout.rollout_id.rsplit(".r", 1)[1])
        if index == 3:
            raise RolloutFailure("reward_error", "the grader is down")
        return {"correct": float(index == 0), "format": 1.0}
'''


def invoke(*args: object, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], env=env)


def test_scored_means_the_failed_share_the_scalar_and_advantages(tmp_path: Path) -> None:
    (tmp_path / "quarter_env.py").write_text(ENV_SOURCE)
    output = tmp_path / "quarter.jsonl"
    result = invoke(
        "run", f"{tmp_path / 'quarter_env.py'}:QuarterFailsEnv", "--data", tmp_path,
        "-k", "4", "-o", output, "--max-failure-share", "1", "--fail-on-error", "0.25",
    )  # fmt: skip
    assert result.exit_code == 0, result.output  # 25% failed: within --fail-on-error 0.25
    report = json.loads(output.with_name("quarter.report.json").read_text())
    # Existing keys keep their meaning (every rollout); the scored mean sits beside them.
    assert report["reward_stats"]["correct"]["mean"] == pytest.approx(0.25)
    assert report["scored_reward_stats"]["correct"]["mean"] == pytest.approx(1 / 3)
    assert report["scored_reward_stats"]["format"]["mean"] == 1.0
    assert report["failed_share"] == pytest.approx(0.25)
    # Weighted scalar: 1 + 0.5 for r0, 0.5 for r1 and r2 (r3 failed: 0 and not scored).
    assert report["reward_weights"] == {"correct": 1.0, "format": 0.5}
    assert report["scored_scalar_stats"]["mean"] == pytest.approx((1.5 + 0.5 + 0.5) / 3)
    assert report["advantage_signal_share"] == 1.0
    assert report["mean_abs_advantage"] > 0
    text = " ".join(result.output.split())
    assert "scored mean" in text and "(weighted)" in text
    assert re.search(r"correct \S* ?0\.250 \S* ?0\.333", text), text
    assert "not scored (operational failures, zero rewards): 25% of rollouts" in text
    assert "reward (weighted) = 1*correct + 0.5*format" in text
    assert "100% of groups give a learning signal" in text

    header = read_results(output).header
    assert header["reward_weights"] == {"correct": 1.0, "format": 0.5}
    data = report_data(read_results(output))
    assert data["summary"]["failed_share"] == pytest.approx(0.25)
    assert data["summary"]["scored_reward_stats"]["correct"]["mean"] == pytest.approx(1 / 3)
    for group in data["groups"]:
        by_index = {rollout["g"]: rollout for rollout in group["r"]}
        assert [by_index[i]["s"] for i in range(4)] == [1.5, 0.5, 0.5, 0.0]
        advantages = [by_index[i]["v"] for i in range(4)]
        assert advantages[3] == 0.0  # not scored: left out of the baseline
        assert advantages[0] == pytest.approx(2**0.5) and advantages[1] < 0
    page = tmp_path / "quarter.html"
    assert invoke("view", output, "-o", page).exit_code == 0
    html = page.read_text()
    assert "scored mean" in html and 'data-testid="failed-share"' in html
    assert "reward (weighted) = 1 * correct + 0.5 * format" in html


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (
            f"{QUICKSTART}/env.py:QuickstartEnv",
            "has no 'QuickstartEnv' (did you mean 'QuickStartEnv'?)",
        ),
        (f"{QUICKSTART}/env.py:quickstartenv", "(did you mean 'QuickStartEnv'?)"),
        (f"{QUICKSTART}/env.py:re", "is not an Environment subclass; environment classes in"),
        (
            "examples.quickstart.env.QuickStartEnv",
            "name a class as path/to/file.py:Class or package.module:Class (did you mean "
            "'examples.quickstart.env:QuickStartEnv'?)",
        ),
        (
            f"{QUICKSTART}/env.py.QuickStartEnv",
            f"(did you mean '{QUICKSTART}/env.py:QuickStartEnv'?)",
        ),
    ],
)
def test_a_wrong_target_says_what_was_meant(target: str, said: str) -> None:
    result = invoke("run", target, "--data", QUICKSTART)
    assert result.exit_code == 3
    assert said in " ".join(result.output.split())


def test_a_plain_def_compute_reward_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "plain_env.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(QUICKSTART)!r})
            from env import QuickStartEnv

            class PlainEnv(QuickStartEnv):
                def compute_reward(self, rollout):
                    return {{"correct": 1.0}}
            """
        )
    )
    result = invoke(
        "run", f"{tmp_path / 'plain_env.py'}:PlainEnv", "--data", QUICKSTART,
        "--mock-policy", f"{QUICKSTART}/policy.py:reply", "-o", tmp_path / "plain.jsonl",
    )  # fmt: skip
    assert result.exit_code == 3
    text = " ".join(result.output.split())
    assert "PlainEnv.compute_reward is not async: it returned dict" in text
    assert "write it as 'async def compute_reward(...)'" in text


LONE_ENV = """
import lone_grader
from benchmax.envs import BaseEnv, Dataset, Example
from benchmax.rewards import extract_completion_text


class LoneEnv(BaseEnv):
    reward_keys = ("ok",)
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        prompt = [{"role": "user", "content": "hi"}]
        return Dataset([Example(id=f"e{i}", payload={"prompt_messages": prompt}) for i in range(2)])

    async def compute_reward(self, rollout):
        return {"ok": lone_grader.grade(extract_completion_text(rollout.messages))}
"""


@pytest.fixture
def lone_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A single-file environment outside any project, with a helper module beside it."""
    (tmp_path / "lone_env.py").write_text(LONE_ENV)
    (tmp_path / "lone_grader.py").write_text("def grade(text):\n    return float(bool(text))\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_validate_local_module_and_flags_in_bundle_errors(lone_project: Path) -> None:
    without = invoke("validate", "lone_env.py:LoneEnv", "--data", ".", "--no-fresh-interpreter")
    assert without.exit_code == 1
    text = " ".join(without.output.split())
    assert "lone_grader" in text and "--local-module NAME" in text and "--pip-dependency" in text
    assert "local_modules" not in text and "pip_dependencies" not in text
    named = invoke(
        "validate", "lone_env.py:LoneEnv", "--data", ".", "--local-module", "lone_grader",
        "--no-fresh-interpreter",
    )  # fmt: skip
    assert named.exit_code == 0, named.output
    bundled = invoke("bundle", "lone_env.py:LoneEnv", "-o", "lone.bundle")
    assert bundled.exit_code == 3
    assert "--local-module NAME" in " ".join(bundled.output.split())
    assert (
        invoke(
            "bundle", "lone_env.py:LoneEnv", "--local-module", "lone_grader", "-o", "lone.bundle"
        ).exit_code
        == 0
    )


def test_the_python_api_keeps_its_argument_names(lone_project: Path) -> None:
    import lone_env  # type: ignore[import-not-found]

    from benchmax.bundle import BundlingError, dump_bundle

    with pytest.raises(BundlingError) as caught:
        dump_bundle(lone_env.LoneEnv, local_modules=[lone_env])
    assert "local_modules" in str(caught.value) and "--local-module" not in str(caught.value)


def _readme_commands(path: Path) -> list[list[str]]:
    text = path.read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block is not None
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def test_the_mcp_examples_readme_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    commands = _readme_commands(REPO / "examples" / "mcp_tools" / "README.md")
    assert [c[:3] for c in commands] == [["uv", "run", "benchmax"]] * 2
    run, view = (c[3:] for c in commands)
    output = tmp_path / "library.jsonl"
    run[run.index("-o") + 1] = str(output)
    result = invoke(*run)
    assert result.exit_code == 0, result.output
    assert len(read_results(output).rollouts) == 48
    view[1] = str(output)
    assert invoke(*view, "-o", tmp_path / "library.html").exit_code == 0
    readme = "\n".join(
        p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    )
    row = next(line for line in readme.splitlines() if line.startswith("| `examples/mcp_tools`"))
    assert " ".join(run[:2]) in row or "examples/mcp_tools/env.py:LibraryEnv" in row


def test_generate_qa_runs_offline_on_your_own_text(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text(
        "# Shipping\n\nThe warehouse in Rotterdam ships orders within 48 hours of payment. "
        "Customers in Norway pay no customs fee for orders under 350 kroner.\n\n"
        "## Returns\n\nReturned items must reach the Rotterdam warehouse within 30 days. "
        "Refunds go back to the original payment method after inspection by the team.\n"
    )
    (docs / "faq.txt").write_text(
        "Support answers chats from Monday to Friday. The office closes early on Fridays "
        "in summer, at three in the afternoon.\n"
    )
    out = tmp_path / "qa"
    result = invoke(
        "generate-qa", docs, "-o", out, "--mock-policy", "examples/corpus/policy.py:reply",
        "--eval-fraction", "0.3",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [
        json.loads(line)
        for name in ("train.jsonl", "eval.jsonl")
        for line in (out / name).read_text().splitlines()
    ]
    assert len(rows) >= 4
    texts = {path.name: path.read_text() for path in docs.iterdir()}
    for row in rows:  # every answer is stated in the document it cites
        assert row["ground_truth"] in texts[row["source"]["file"]]
    assert {"48", "350", "Rotterdam"} & {row["ground_truth"] for row in rows}
