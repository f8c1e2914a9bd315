"""Every ``benchmax`` command and Python sample in the README is valid, and the offline ones run."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmax.cli import cli

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def commands() -> list[list[str]]:
    """The arguments of every ``uv run benchmax ...`` command in the README's shell blocks."""
    found = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["uv", "run", "benchmax"]:
                found.append(words[3:])
    return found


def test_the_readme_shows_every_command() -> None:
    assert {argv[0] for argv in commands()} == {
        "run", "bundle", "inspect", "mock-serve", "view", "show", "rescore", "compare",
    }  # fmt: skip


@pytest.mark.parametrize("argv", commands(), ids=lambda argv: " ".join(argv)[:60])
def test_every_readme_command_uses_existing_options(argv: list[str]) -> None:
    command = cli.commands[argv[0]]
    known = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    assert [word for word in argv[1:] if word.startswith("-") and word not in known] == []


def test_the_offline_readme_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    offline = [argv for argv in commands() if "--base-url" not in argv and argv[0] != "mock-serve"]
    assert len(offline) >= 5
    for number, argv in enumerate(offline):
        argv = [
            str(tmp_path / word) if word.endswith(".bundle") or word.startswith("runs/") else word
            for word in argv
        ]
        if argv[0] == "run" and "-o" not in argv:
            argv += ["-o", str(tmp_path / f"run{number}.jsonl")]
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 0, (argv, result.output)


async def test_the_environment_and_its_test_from_the_readme_work() -> None:
    environment, test = blocks("python")[:2]
    namespace: dict[str, object] = {"__name__": "readme_sample"}
    exec(compile(environment + test, "README.md", "exec"), namespace)
    await namespace["test_capitals"]()  # type: ignore[operator]


def test_the_rewards_sample_builds_its_judge_and_rubrics() -> None:
    """Everything but the final (network) ``await`` of the rewards sample runs."""
    sample = next(block for block in blocks("python") if "score_rubrics(" in block)
    module = ast.parse(sample)
    *setup, call = module.body
    assert isinstance(call, ast.Assign) and isinstance(call.value, ast.Await)
    namespace: dict[str, object] = {}
    exec(compile(ast.Module(setup, type_ignores=[]), "README.md", "exec"), namespace)
    assert len(namespace["rubrics"]) == 2  # type: ignore[arg-type]


def test_every_python_sample_compiles() -> None:
    for number, block in enumerate(blocks("python")):
        compile(
            block, f"README.md python block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
