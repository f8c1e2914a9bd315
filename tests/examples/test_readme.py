"""Every ``benchmax`` command and Python sample of the documentation (README.md and the site's
pages under docs/) is valid, and the offline ones run."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.docs._blocks import Block, read_blocks

from benchmax.auth import StaticBearerAuth
from benchmax.cli import cli
from benchmax.envs import RolloutRequest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)
"""The README and every page of the site, in that order (the README's first python block is
the environment the later samples build on)."""


def blocks(language: str) -> list[str]:
    return [block.code for block in _all_blocks() if block.language == language]


def _all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in read_blocks(path)]


def commands(*, runnable_only: bool = False) -> list[list[str]]:
    """The arguments of every ``uv run benchmax ...`` command in the documentation's shell
    blocks (with ``runnable_only``, of the blocks not marked ``docs: skip``)."""
    found = []
    for block in _all_blocks():
        if block.language != "bash" or (runnable_only and block.skip is not None):
            continue
        for line in block.code.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["uv", "run", "benchmax"]:
                found.append(words[3:])
            elif words[:5] == ["uv", "run", "--group", "trl", "benchmax"]:
                found.append(words[5:])
    return found


def test_the_readme_shows_every_command() -> None:
    assert {argv[0] for argv in commands()} == {
        "run", "bundle", "inspect", "mock-serve", "validate", "generate-qa", "traces", "init",
        "view", "show", "rescore", "compare", "train", "serve", "serve-model",
    }  # fmt: skip


@pytest.mark.parametrize("argv", commands(), ids=lambda argv: " ".join(argv)[:60])
def test_every_readme_command_uses_existing_options(argv: list[str]) -> None:
    command = cli.commands[argv[0]]
    known = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    known.add("--help")
    assert [word for word in argv[1:] if word.startswith("-") and word not in known] == []


def test_the_offline_readme_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    # mock-serve, serve and serve-model run until Ctrl-C; train needs the trl group (its own
    # tests: -m train); tests/docs runs every block as written.
    long_running = {"mock-serve", "serve", "serve-model", "train"}
    offline = [
        argv
        for argv in commands(runnable_only=True)
        if "--base-url" not in argv and argv[0] not in long_running
    ]
    assert len(offline) >= 5
    for number, argv in enumerate(offline):
        argv = [
            str(tmp_path / word) if word.endswith(".bundle") or word.startswith("runs/") else word
            for word in argv
        ]
        argv = [  # traces
            str(tmp_path / word) if word.startswith("traces-data") else word for word in argv
        ]
        argv = [str(tmp_path / word) if word in {"qa", "qa-mix"} else word for word in argv]
        if argv[0] == "init":  # the new project's commands run inside it
            argv[1] = str(tmp_path / argv[1])
        elif len(argv) > 1 and argv[1].startswith("env.py:"):
            monkeypatch.chdir(tmp_path / "my-env")
        else:
            monkeypatch.chdir(REPO)
        if argv[0] == "run" and "-o" not in argv:
            argv += ["-o", str(tmp_path / f"run{number}.jsonl")]
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 0, (argv, result.output)


async def test_the_environment_and_its_test_from_the_readme_work() -> None:
    environment = blocks("python")[0]
    test = next(block for block in blocks("python") if "async def test_capitals" in block)
    namespace: dict[str, object] = {"__name__": "readme_sample"}
    exec(compile(environment + test, "README.md", "exec"), namespace)
    await namespace["test_capitals"]()  # type: ignore[operator]


async def test_the_first_reward_example_cannot_be_gamed_by_listing_answers() -> None:
    from benchmax.testing import MockModelServer

    namespace: dict[str, object] = {"__name__": "readme_sample"}
    exec(compile(blocks("python")[0], "README.md", "exec"), namespace)
    env_class = namespace["CapitalsEnv"]
    example = env_class().to_example({"country": "France", "capital": "Paris"})  # type: ignore[operator]
    replies = {
        "listed": "<answer>Paris, Lyon, Berlin, Rome, Madrid</answer>",
        "untagged-list": "Paris Lyon Berlin Rome Madrid",
        "tagged": "Let me think. <answer>Paris</answer>",
        "plain": "Paris.",
    }
    async with MockModelServer(lambda body, request: replies[request.session]) as server:
        outcomes = await env_class().run_group(  # type: ignore[attr-defined]
            [
                RolloutRequest(
                    rollout_id=name, example=example, model="m",
                    base_url=server.session_url(name), model_auth=StaticBearerAuth("test"),
                )
                for name in replies
            ]
        )  # fmt: skip
    scores = {name: outcome.rewards["correct"] for name, outcome in outcomes.items()}
    assert scores == {"listed": 0.0, "untagged-list": 0.0, "tagged": 1.0, "plain": 1.0}


async def test_the_bind_model_auth_sample_runs_a_judged_group() -> None:
    from benchmax.testing import MockModelServer, RecordedRequest, message_text

    environment = blocks("python")[0]
    sample = next(block for block in blocks("python") if "bind_model_auth(" in block)
    namespace: dict[str, object] = {"__name__": "readme_sample"}
    exec(compile(environment + sample, "README.md", "exec"), namespace)

    def policy(body: dict, request: RecordedRequest) -> str:
        if request.session == "judge":
            prompt = message_text(body["messages"][-1]["content"])
            return json.dumps({"score": int("Paris" in prompt), "reasoning": "checked"})
        return "Paris." if "France?" in body["messages"][-1]["content"] else "Lyon."

    async with MockModelServer(policy) as server:
        env = namespace["JudgedCapitalsEnv"](judge_base_url=server.session_url("judge"))  # type: ignore[operator]
        example = env.to_example({"country": "France", "capital": "Paris"})
        outcomes = await namespace["judged_group"](  # type: ignore[operator]
            env, example, base_url=server.base_url, model_key="sk-model-123",
            judge_key="sk-judge-456", k=2,
        )  # fmt: skip
        judge_calls = server.requests_for("judge")
        unbound = await env.run_group(  # the same rollouts without the binding
            [
                RolloutRequest(
                    rollout_id="r9", example=example, model="m", base_url=server.base_url,
                    model_auth=StaticBearerAuth("sk-model-123"),
                )
            ]
        )  # fmt: skip
    assert {rid: o.rewards for rid, o in outcomes.items()} == {
        "r0": {"rubric_correct": 1.0},
        "r1": {"rubric_correct": 1.0},
    }
    assert len(judge_calls) == 2
    assert {call.headers["authorization"] for call in judge_calls} == {"Bearer sk-judge-456"}
    assert unbound["r9"].termination_reason == "judge_error"


def test_the_rewards_sample_builds_its_judge_and_rubrics() -> None:
    """Everything but the final (network) ``await`` of the rewards sample runs."""
    sample = next(block for block in blocks("python") if "score_rubrics(" in block)
    module = ast.parse(sample)
    *setup, call = module.body
    assert isinstance(call, ast.Assign) and isinstance(call.value, ast.Await)
    namespace: dict[str, object] = {}
    exec(compile(ast.Module(setup, type_ignores=[]), "README.md", "exec"), namespace)
    assert len(namespace["rubrics"]) == 2  # type: ignore[arg-type]


def test_the_run_config_sample_uses_every_field_by_its_real_name() -> None:
    import dataclasses

    from benchmax.runner import RunConfig

    sample = next(block for block in blocks("python") if "RunConfig(" in block)
    call = next(
        node
        for node in ast.walk(ast.parse(sample))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RunConfig"
    )
    used = {keyword.arg for keyword in call.keywords}
    fields = {field.name for field in dataclasses.fields(RunConfig)}
    assert used <= fields
    described = used | {"env_definition", "definition_extras", "recorded_base_url", "log_level"}
    assert described == fields  # the sample and the text after it name every field
    assert all(f"`{name}`" in README for name in fields - used)
    assert "await run_environment(" in sample


def test_every_run_option_is_documented() -> None:
    command = cli.commands["run"]
    options = [opt for param in command.params for opt in param.opts if opt.startswith("--")]
    assert [option for option in options if not documented(option)] == []


def documented(option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", README) is not None


def test_every_bundle_option_is_documented() -> None:
    command = cli.commands["bundle"]
    options = [opt for param in command.params for opt in param.opts if opt.startswith("--")]
    assert [option for option in options if not documented(option)] == []


def test_every_python_sample_compiles() -> None:
    for number, block in enumerate(blocks("python")):
        compile(
            block, f"README.md python block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
