"""``benchmax bundle``, ``benchmax inspect`` and running a bundle file."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from tests.cli.conftest import REPO
from tests.runner.sample_envs import NumberEnv

from benchmax.bundle import dump_bundle, read_bundle, save_bundle

QUICKSTART = REPO / "examples" / "quickstart"


def error_line(result: Result) -> str:
    assert result.exit_code != 0, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: ")
    return line


def test_bundle_then_inspect_then_run(invoke: Callable[..., Result], tmp_path: Path) -> None:
    bundle_file = tmp_path / "qs.bundle"
    made = invoke(
        "bundle", f"{QUICKSTART}/env.py:QuickStartEnv", "--pip-dependency", "httpx>=0.28",
        "-o", bundle_file,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    bundle = read_bundle(bundle_file)
    from benchmax.bundle import bundle_digest

    digest = bundle_digest(bundle)
    assert f"digest:        {digest}" in made.output
    assert f"size:          {bundle_file.stat().st_size} bytes" in made.output
    assert "dependencies:  httpx>=0.28" in made.output
    assert "local modules: quickstart.env" in made.output

    shown = invoke("inspect", bundle_file)
    assert shown.exit_code == 0, shown.output
    assert digest in shown.output and "verified" in shown.output
    assert "compatible with this runtime" in shown.output
    assert "class QuickStartEnv(BaseEnv):" in shown.output
    assert "httpx>=0.28" in shown.output

    output = tmp_path / "run.jsonl"
    ran = invoke(
        "run", bundle_file, "--data", QUICKSTART, "-n", "2", "-k", "2", "-o", output,
        "--mock-policy", f"{QUICKSTART}/policy.py:reply",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    header = json.loads(output.read_text().splitlines()[0])
    assert header["definition"]["env"] == {"bundle_digest": digest}


def test_bundle_with_env_args_and_file_outside_any_project(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    source = tmp_path / "standalone_env.py"
    source.write_text((QUICKSTART / "env.py").read_text())
    bundle_file = tmp_path / "out" / "standalone.bundle"
    made = invoke(
        "bundle", f"{source}:QuickStartEnv", "--env-arg", "max_turns=2", "-o", bundle_file
    )
    assert made.exit_code == 0, made.output
    assert "local modules: standalone_env" in made.output
    from benchmax.bundle import load_bundle

    env_class, args = load_bundle(read_bundle(bundle_file), instantiate=False)
    assert args == {"max_turns": 2}
    assert env_class.__name__ == "QuickStartEnv"


class _TouchOnLoad:
    """Unpickling this creates a file: proof that something was (not) unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def test_inspect_never_unpickles(invoke: Callable[..., Result], tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    bundle = dump_bundle(NumberEnv, constructor_args={"count": 1, "delay": _TouchOnLoad(marker)})
    save_bundle(bundle, tmp_path / "b.bundle")
    marker.unlink(missing_ok=True)  # the bundler's own checks may load the pickle
    shown = invoke("inspect", tmp_path / "b.bundle")
    assert shown.exit_code == 0, shown.output
    assert "class NumberEnv" in shown.output
    assert not marker.exists()


def test_inspect_reports_an_incompatible_bundle_and_run_refuses_it(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    bundle = dump_bundle(NumberEnv)
    old = dataclasses.replace(
        bundle, metadata=dataclasses.replace(bundle.metadata, benchmax_version="0.1.0")
    )
    save_bundle(old, tmp_path / "old.bundle")
    shown = invoke("inspect", tmp_path / "old.bundle")
    assert shown.exit_code == 0
    assert "incompatible with this runtime" in shown.output
    assert "cannot load bundle" in error_line(invoke("run", tmp_path / "old.bundle"))


def test_tampered_and_unreadable_bundles(invoke: Callable[..., Result], tmp_path: Path) -> None:
    good = tmp_path / "good.bundle"
    save_bundle(dump_bundle(NumberEnv), good)
    tampered = tmp_path / "tampered.bundle"
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(tampered, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "env.pkl":
                data = data[:-1] + bytes([data[-1] ^ 1])
            target.writestr(info, data)
    assert "cannot read bundle" in error_line(invoke("inspect", tampered))
    (tmp_path / "junk.bundle").write_bytes(b"junk")
    assert "cannot read bundle" in error_line(invoke("inspect", tmp_path / "junk.bundle"))
    assert "cannot read bundle" in error_line(invoke("inspect", tmp_path / "absent.bundle"))


def test_bundle_errors_are_one_line(invoke: Callable[..., Result], tmp_path: Path) -> None:
    target = f"{QUICKSTART}/env.py:QuickStartEnv"
    bad_dependency = invoke(
        "bundle", target, "--pip-dependency", "not a req ???", "-o", tmp_path / "x"
    )
    assert "Invalid pip_dependencies" in error_line(bad_dependency)
    assert "must name a class" not in error_line(
        invoke("bundle", "nope.py:X", "-o", tmp_path / "x")
    )
    missing_output = invoke("bundle", target)
    assert missing_output.exit_code != 0 and "--output" in missing_output.output


def test_bundle_facts_are_printed_literally(invoke: Callable[..., Result], tmp_path: Path) -> None:
    bundle_file = tmp_path / "x[1].bundle"
    made = invoke(
        "bundle", f"{QUICKSTART}/env.py:QuickStartEnv",
        "--pip-dependency", "uvicorn[standard]>=0.30", "-o", bundle_file,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "dependencies:  uvicorn[standard]>=0.30" in made.output
    assert f"wrote:         {bundle_file}" in made.output
    shown = invoke("inspect", bundle_file)
    assert "dependencies:  uvicorn[standard]>=0.30" in shown.output
    # the source is shown exactly: long lines are not cut to a terminal width
    long_line = next(
        line
        for line in (QUICKSTART / "env.py").read_text().splitlines()
        if "row_to_example=" in line
    )
    assert len(long_line) > 90
    assert long_line in shown.output.splitlines()


def test_a_module_target_outside_any_project_travels_as_source(
    invoke: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "outside_module_env.py").write_text((QUICKSTART / "env.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    made = invoke("bundle", "outside_module_env:QuickStartEnv", "-o", tmp_path / "o.bundle")
    assert made.exit_code == 0, made.output
    assert "local modules: outside_module_env" in made.output


def test_an_installed_target_module_is_left_to_its_distribution(
    invoke: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "installed_looking_env.py").write_text((QUICKSTART / "env.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("benchmax.cli._bundle_commands._installed", lambda module: True)
    made = invoke("bundle", "installed_looking_env:QuickStartEnv", "-o", tmp_path / "i.bundle")
    assert "installed_looking_env" in error_line(made)
    assert "pip_dependencies" in error_line(made)


def test_installed_modules_are_recognized() -> None:
    """An installed target module stays a dependency instead of being copied."""
    import httpx
    import tests.runner.sample_envs

    from benchmax.cli._bundle_commands import _installed

    assert _installed(httpx)
    assert not _installed(tests.runner.sample_envs)


def test_mock_marker_in_bundled_arguments(invoke: Callable[..., Result], tmp_path: Path) -> None:
    judge = REPO / "examples" / "rubric_judge"
    bundle_file = tmp_path / "judge.bundle"
    made = invoke(
        "bundle", f"{judge}/env.py:RubricJudgeEnv", "--env-arg", "judge_base_url=@mock",
        "-o", bundle_file,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    output = tmp_path / "run.jsonl"
    ran = invoke(
        "run", bundle_file, "--data", judge, "-n", "2", "-k", "2",
        "--mock-policy", f"{judge}/policy.py:respond", "-o", output,
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "finished" in ran.output and "judge_error" not in ran.output
    refused = invoke(
        "run", bundle_file, "--data", judge, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"
    )
    assert "'@mock' in --env-arg needs the embedded mock" in error_line(refused)
