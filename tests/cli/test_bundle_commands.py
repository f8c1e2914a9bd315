"""``benchmax bundle``, ``benchmax inspect`` and running a bundle file."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
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
    assert shown.exit_code == 1
    assert "incompatible with this runtime" in shown.output
    assert "cannot load bundle" in error_line(invoke("run", tmp_path / "old.bundle"))


def test_inspect_json_gives_the_documented_keys(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    from benchmax.bundle import bundle_digest

    marker = tmp_path / "unpickled"
    bundle = dump_bundle(
        NumberEnv,
        constructor_args={"count": 1, "delay": _TouchOnLoad(marker)},
        pip_dependencies=["httpx>=0.28"],
    )
    save_bundle(bundle, tmp_path / "b.bundle")
    marker.unlink(missing_ok=True)
    shown = invoke("inspect", tmp_path / "b.bundle", "--json")
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.output)
    assert document == {
        "bundle": str(tmp_path / "b.bundle"),
        "digest": bundle_digest(bundle),
        "digest_verified": True,
        "pickle_bytes": len(bundle.pickled),
        "python_version": bundle.metadata.python_version,
        "benchmax_version": bundle.metadata.benchmax_version,
        "pip_dependencies": ["httpx>=0.28"],
        "compatible": True,
        "incompatibility": None,
        "env_class_source": bundle.metadata.env_class_source,
    }
    assert "class NumberEnv" in document["env_class_source"]
    assert not marker.exists()


def test_inspect_json_reports_incompatibility_and_unreadable_files(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    bundle = dump_bundle(NumberEnv)
    old = dataclasses.replace(
        bundle,
        metadata=dataclasses.replace(
            bundle.metadata, benchmax_version="0.1.0", env_class_source="x = '\x1b[31m'"
        ),
    )
    save_bundle(old, tmp_path / "old.bundle")
    shown = invoke("inspect", tmp_path / "old.bundle", "--json")
    assert shown.exit_code == 1, shown.output
    assert "\x1b" not in shown.output and "\\u001b" in shown.output  # escaped by JSON
    document = json.loads(shown.output)
    assert document["compatible"] is False
    assert "0.1.0" in document["incompatibility"]
    (tmp_path / "junk.bundle").write_bytes(b"junk")
    assert "cannot read bundle" in error_line(invoke("inspect", tmp_path / "junk.bundle", "--json"))


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
    assert "Invalid --pip-dependency" in error_line(bad_dependency)  # the flag, not the API
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
    assert "--pip-dependency" in error_line(made)


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


LONELY_ENV = """\
import lonely_helpers
from benchmax.envs import Dataset, Environment, Example, RolloutAttempt


class LonelyEnv(Environment):
    reward_keys = ("bonus",)

    def __init__(self, scale=1.0):
        self.scale = scale

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([Example(id="ex-0", payload={})])

    async def run_rollout(self, request):
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"bonus": lonely_helpers.bonus() * self.scale},
        )
"""


@pytest.fixture
def lonely_env(tmp_path: Path) -> Iterator[Path]:
    """A single-file environment outside any project, with a sibling helper module."""
    directory = tmp_path / "lonely"
    directory.mkdir()
    (directory / "lonely_env_file.py").write_text(LONELY_ENV)
    (directory / "lonely_helpers.py").write_text("def bonus():\n    return 0.25\n")
    yield directory / "lonely_env_file.py"
    for name in ("lonely_env_file", "lonely_helpers"):
        sys.modules.pop(name, None)


def test_local_module_carries_a_sibling_module_of_a_single_file_env(
    invoke: Callable[..., Result], tmp_path: Path, lonely_env: Path
) -> None:
    refused = invoke("bundle", f"{lonely_env}:LonelyEnv", "-o", tmp_path / "no.bundle")
    assert "referenced source outside the environment project: lonely_helpers" in error_line(
        refused
    )
    bundle_file = tmp_path / "lonely.bundle"
    made = invoke(
        "bundle", f"{lonely_env}:LonelyEnv", "--local-module", "lonely_helpers",
        "-o", bundle_file,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "local modules: lonely_env_file, lonely_helpers" in made.output
    # The bundle loads where neither module is importable (an empty directory, no path).
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    script = (
        "import asyncio, sys\n"
        "from benchmax.bundle import load_bundle, read_bundle\n"
        "from benchmax.envs import Example, RolloutRequest, StaticBearerAuth\n"
        "env = load_bundle(read_bundle(sys.argv[1]))\n"
        "request = RolloutRequest(rollout_id='r0', example=Example(id='e', payload={}),\n"
        "    model='m', base_url='http://x.invalid/v1', model_auth=StaticBearerAuth('k'))\n"
        "print(asyncio.run(env.run_rollout(request)).rewards['bonus'])\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    finished = subprocess.run(
        [sys.executable, "-c", script, str(bundle_file)],
        cwd=empty,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "0.25"


def test_local_module_that_cannot_be_imported(
    invoke: Callable[..., Result], tmp_path: Path, lonely_env: Path
) -> None:
    target = f"{lonely_env}:LonelyEnv"
    result = invoke(
        "bundle", target, "--local-module", "no_such_module_xyz", "-o", tmp_path / "x.bundle"
    )
    assert "cannot import --local-module 'no_such_module_xyz'" in error_line(result)
    assert not (tmp_path / "x.bundle").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env-arg", "bogus=1"], "unexpected keyword argument 'bogus'"),
        (["--env-arg", "scale=2", "--env-arg", "other=3"], "unexpected keyword argument 'other'"),
    ],
)
def test_constructor_arguments_the_class_refuses_fail_at_bundle_time(
    invoke: Callable[..., Result],
    tmp_path: Path,
    lonely_env: Path,
    args: list[str],
    expected: str,
) -> None:
    bundle_file = tmp_path / "x.bundle"
    target = f"{lonely_env}:LonelyEnv"
    result = invoke("bundle", target, "--local-module", "lonely_helpers", *args, "-o", bundle_file)
    message = error_line(result)
    assert "LonelyEnv does not accept these constructor arguments" in message
    assert expected in message
    assert not bundle_file.exists()


KWARGS_ENV = """
from pathlib import Path

from benchmax.envs import BaseEnv, Dataset, Example


class KwargsEnv(BaseEnv):
    reward_keys = ("correct",)

    def __init__(self, tolerance: float = 0.01, **kwargs) -> None:
        super().__init__(**kwargs)  # BaseEnv's limits
        self.tolerance = tolerance

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None) -> Dataset:
        return Dataset([Example(id="a", payload={"prompt_messages": []})])

    async def compute_reward(self, rollout) -> dict[str, float]:
        return {"correct": 1.0}
"""


def test_a_misspelled_argument_swallowed_by_kwargs_is_named_at_bundle_time(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    """``**kwargs`` passed on to BaseEnv accepts any name at bundle time; the misspelled one
    only failed when the bundle was run. The bundle is still written (the class may keep
    its **kwargs), with a note naming the argument and the __init__ that lacks it."""
    from benchmax.bundle import load_bundle

    (tmp_path / "kwargs_env.py").write_text(KWARGS_ENV)
    target = f"{tmp_path / 'kwargs_env.py'}:KwargsEnv"
    bundle_file = tmp_path / "x.bundle"
    result = invoke(
        "bundle", target, "--env-arg", "tolerence=0.2", "--env-arg", "max_turns=2",
        "-o", bundle_file,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (
        "note: KwargsEnv.__init__ takes **kwargs, but no parameter of it or of "
        "BaseEnv.__init__ is named 'tolerence': if KwargsEnv passes its **kwargs on, the "
        "bundle will fail when it is run (benchmax validate constructs it)"
    ) in " ".join(result.stderr.split())
    with pytest.raises(TypeError, match="tolerence"):
        load_bundle(read_bundle(bundle_file))  # what the note warns of

    spelled = invoke(
        "bundle", target, "--env-arg", "tolerance=0.2", "--env-arg", "max_turns=2",
        "-o", tmp_path / "y.bundle",
    )  # fmt: skip
    assert spelled.exit_code == 0, spelled.output
    assert "note:" not in spelled.stderr
    env = load_bundle(read_bundle(tmp_path / "y.bundle"))
    assert (env.tolerance, env.max_turns) == (0.2, 2)


def test_accepted_constructor_arguments_are_stored(
    invoke: Callable[..., Result], tmp_path: Path, lonely_env: Path
) -> None:
    bundle_file = tmp_path / "x.bundle"
    target = f"{lonely_env}:LonelyEnv"
    result = invoke(
        "bundle", target, "--local-module", "lonely_helpers", "--env-arg", "scale=2",
        "-o", bundle_file,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    from benchmax.bundle import load_bundle

    _env_class, args = load_bundle(read_bundle(bundle_file), instantiate=False)
    assert args == {"scale": 2}
