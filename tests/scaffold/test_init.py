"""``benchmax init``: what it writes, what it refuses, and (marker ``scaffold``, run by
.ci/run) each template's project from a fresh directory: its own tests, validate and run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import benchmax
from benchmax.cli import cli
from benchmax.scaffold import (
    TEMPLATES,
    ScaffoldError,
    benchmax_requirement,
    benchmax_source,
    create_project,
)

REPO = Path(__file__).resolve().parents[2]


def invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_template_writes_a_complete_project(tmp_path: Path, template: str) -> None:
    project = tmp_path / "My Env"
    written = create_project(project, template)
    names = sorted(path.relative_to(project).as_posix() for path in written)
    assert names == sorted(
        [
            ".gitignore",
            ".python-version",
            "README.md",
            "data/eval.jsonl",
            "data/train.jsonl",
            "env.py",
            "policy.py",
            "pyproject.toml",
            "tests/test_env.py",
        ]
    )
    for split in ("train", "eval"):
        rows = [
            json.loads(x) for x in (project / "data" / f"{split}.jsonl").read_text().splitlines()
        ]
        assert len(rows) >= 3
    readme = (project / "README.md").read_text()
    chosen = TEMPLATES[template]
    assert "{{" not in readme and "# my-env" in readme
    assert (
        f"uv run benchmax run {chosen.target} --data data --mock-policy {chosen.policy}" in readme
    )
    assert "uv run benchmax validate" in readme and "uv run benchmax view runs/mock.jsonl" in readme
    assert f"class {chosen.class_name}(BaseEnv)" in (project / "env.py").read_text()


def test_the_project_depends_on_this_checkout_by_path(tmp_path: Path) -> None:
    assert benchmax_source() == REPO  # the tests run from the source checkout
    create_project(tmp_path / "p")
    pyproject = tomllib.loads((tmp_path / "p" / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == ["benchmax"]
    source = pyproject["tool"]["uv"]["sources"]["benchmax"]
    assert source["editable"] is True
    # Relative to the project (issue 28 kind 12): no absolute path of the machine in it.
    assert not Path(source["path"]).is_absolute()
    assert (tmp_path / "p" / source["path"]).resolve() == REPO.resolve()
    assert "package" not in pyproject["tool"]["uv"]  # installed, so its entry point is live
    assert pyproject["project"]["name"] == "p"
    assert pyproject["project"]["entry-points"]["benchmax.environments"] == {"p": "env:QAEnv"}
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["only-include"] == ["env.py"]
    assert pyproject["tool"]["pytest"]["ini_options"]["pythonpath"] == ["."]


@pytest.mark.parametrize(
    ("directory", "name"),
    [("ünï", "uni"), ("My Env!", "my-env"), ("Café Bot", "cafe-bot"), ("日本", "benchmax-env")],
)
def test_the_project_name_comes_from_the_directory(
    tmp_path: Path, directory: str, name: str
) -> None:
    create_project(tmp_path / directory)
    pyproject = tomllib.loads((tmp_path / directory / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == name


def test_an_installed_benchmax_is_pinned_to_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages" / "benchmax"
    site.mkdir(parents=True)
    monkeypatch.setattr(benchmax, "__file__", str(site / "__init__.py"))
    assert benchmax_source() is None
    assert benchmax_requirement() == (f"benchmax=={benchmax.__version__}", None)
    create_project(tmp_path / "p")
    pyproject = tomllib.loads((tmp_path / "p" / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == [f"benchmax=={benchmax.__version__}"]
    assert "sources" not in pyproject["tool"].get("uv", {})


def test_a_checkout_of_another_project_is_not_taken_for_benchmax(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src" / "benchmax").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    monkeypatch.setattr(benchmax, "__file__", str(tmp_path / "src" / "benchmax" / "__init__.py"))
    assert benchmax_source() is None


def test_a_non_empty_directory_a_file_or_an_unknown_template_is_refused(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="is not empty"):
        create_project(tmp_path / "taken")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ScaffoldError, match="not a directory"):
        create_project(tmp_path / "file")
    with pytest.raises(ScaffoldError, match="unknown template 'chat'"):
        create_project(tmp_path / "new", "chat")
    (tmp_path / "empty").mkdir()
    assert create_project(tmp_path / "empty")  # an empty directory is fine


def test_the_command_prints_the_next_steps_and_refuses_in_one_line(tmp_path: Path) -> None:
    result = invoke("init", tmp_path / "judge-env", "--template", "judge")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # wrapped where the temporary path is long
    assert "created" in text and "judge template" in text
    assert f"depends on benchmax from {REPO}" in text
    assert (
        "uv run benchmax run env.py:JudgeEnv --data data --mock-policy policy.py:respond "
        "--env-arg judge_base_url=@mock -o runs/mock.jsonl" in result.output
    )
    again = invoke("init", tmp_path / "judge-env")
    assert again.exit_code == 3 and "is not empty" in again.output
    bad = invoke("init", tmp_path / "x", "--template", "chat")
    assert bad.exit_code == 2 and "chat" in bad.output


def test_the_printed_cd_step_is_quoted_for_the_shell(tmp_path: Path) -> None:
    directory = tmp_path / ("my env (v2) " + "long-" * 20)
    result = invoke("init", directory)
    assert result.exit_code == 0, result.output
    assert f"created {directory} (qa template, 9 files)\n" in result.output  # not wrapped
    [step] = [line.strip() for line in result.output.splitlines() if line.strip().startswith("cd ")]
    assert step == f"cd '{directory}'"


def test_no_file_of_a_project_holds_an_absolute_path_of_the_machine(tmp_path: Path) -> None:
    for template in TEMPLATES:
        project = tmp_path / template
        create_project(project, template)
        for path in project.rglob("*"):
            if path.is_file():
                text = path.read_text()
                for absolute in (str(REPO), str(tmp_path), str(Path.home())):
                    # as a path of its own (a relative ../../work/... merely ends with it)
                    found = re.search(rf"(?<![.\w/]){re.escape(absolute)}", text)
                    assert found is None, (path, absolute)


def test_a_name_with_a_newline_or_an_escape_sequence_prints_safely(tmp_path: Path) -> None:
    directory = tmp_path / "two\nlines \x1b[31mred\x1b[0m it's"
    result = invoke("init", directory)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "two\nlines" not in result.output
    assert f"created {tmp_path}/two\\x0alines \\x1b[31mred\\x1b[0m it's (qa" in result.output
    [step] = [line.strip() for line in result.output.splitlines() if line.strip().startswith("cd ")]
    assert step == f"cd $'{tmp_path}/two\\x0alines \\x1b[31mred\\x1b[0m it\\'s'"
    # The printed word is the name again for bash's ANSI-C quoting.
    echoed = subprocess.run(
        ["bash", "-c", f"printf %s {step[3:]}"], capture_output=True, text=True, check=True
    )
    assert echoed.stdout == str(directory)


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def test_generated_python_is_lint_clean_and_formatted(tmp_path: Path) -> None:
    for template in TEMPLATES:
        create_project(tmp_path / template, template)
    ruff = _tool("ruff")
    for command in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        result = subprocess.run(
            [ruff, *command, "--isolated", "--line-length", "100", str(tmp_path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.scaffold
def test_generated_python_passes_mypy_strict(tmp_path: Path) -> None:
    mypy = _tool("mypy")
    for template in TEMPLATES:
        project = tmp_path / template
        create_project(project, template)
        result = subprocess.run(
            [mypy, "--strict", "--python-executable", sys.executable, "--cache-dir",
             str(tmp_path / ".mypy"), "env.py", "policy.py", "tests/test_env.py"],
            cwd=project, capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, (template, result.stdout + result.stderr)


def _uv(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``uv run ARGS`` in ``project``: offline from the warm cache, and online only when the
    cache lacks what resolving the project needs (a fresh machine's first run)."""
    uv = [found] if (found := shutil.which("uv")) else ["python3", "-m", "uv"]  # as .ci/run does
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTEST_ADDOPTS"}
    }
    for offline in (["--offline"], []):
        completed = subprocess.run(
            [*uv, "run", *offline, "--project", str(project), *args],
            cwd=project,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if "network was disabled" not in completed.stderr:
            break
    return completed


@pytest.mark.scaffold
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_fresh_project_passes_its_tests_validates_and_runs(tmp_path: Path, template: str) -> None:
    project = tmp_path / f"fresh-{template}"
    created = invoke("init", project, "--template", template)
    assert created.exit_code == 0, created.output
    chosen = TEMPLATES[template]
    mock = ["--data", "data", "--mock-policy", chosen.policy, *chosen.env_args.split()]

    tests = _uv(project, "pytest", "-q", "-p", "no:randomly")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert " passed" in tests.stdout and "failed" not in tests.stdout

    # by its installed name: the project declares it in the benchmax.environments group
    validate = _uv(project, "benchmax", "validate", project.name, *mock, "--json")
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert json.loads(validate.stdout)["ok"] is True

    run = _uv(project, "benchmax", "run", chosen.target, *mock, "-o", "runs/mock.jsonl")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((project / "runs" / "mock.report.json").read_text())
    assert set(report["rollouts_by_reason"]) == {"finished"}
    first_key = chosen_first_key(report)
    stats = report["reward_stats"][first_key]
    assert 0 < stats["mean"] < 1 and stats["max"] == 1.0 and stats["min"] == 0.0


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_each_templates_own_tests_pass_against_this_checkout(tmp_path: Path, template: str) -> None:
    # the fast half of the scaffold test above: the generated tests, run with this
    # interpreter (benchmax, pytest and pytest-asyncio are the project's dependencies)
    project = tmp_path / f"fresh-{template}"
    create_project(project, template)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert " passed" in completed.stdout and "failed" not in completed.stdout


def chosen_first_key(report: dict) -> str:
    return sorted(report["reward_stats"])[0]


def test_the_readme_documents_init_and_its_templates() -> None:
    readme = "\n".join(
        p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    )
    assert "uv run benchmax init my-env" in readme
    assert all(f"`{name}`" in readme for name in TEMPLATES)
