"""benchmax and its CLI work without Ray; ``--ray`` then says how to get it. No cluster needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.runner.sample_envs import NumberEnv, number_config

from benchmax.bundle import dump_bundle
from benchmax.cli import cli
from benchmax.runner import ExecutorError, RayExecutor, run_environment

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"
MISSING = "Ray is not installed; install it with: pip install 'benchmax[ray]'"


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import ray`` fails in this process, as it does where Ray is not installed."""
    for name in [n for n in sys.modules if n == "ray" or n.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)


def run(*args: object) -> tuple[int, str]:
    quickstart = [f"{QUICKSTART}/env.py:QuickStartEnv", "--data", str(QUICKSTART)]
    result = CliRunner().invoke(cli, ["run", *quickstart, *(str(a) for a in args)])
    return result.exit_code, result.output


def test_run_with_ray_but_without_ray_installed_says_how_to_install_it(
    no_ray: None, tmp_path: Path
) -> None:
    code, output = run("--ray", "-o", tmp_path / "out.jsonl")
    assert code == 3
    assert output == f"Error: {MISSING}\n"
    assert not (tmp_path / "out.jsonl").exists()


async def test_ray_executor_without_ray_installed_raises_executor_error(
    no_ray: None, tmp_path: Path
) -> None:
    with pytest.raises(ExecutorError, match=r"^Ray is not installed; install it with: pip"):
        await run_environment(NumberEnv(2), number_config(tmp_path), executor=RayExecutor())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--ray-workers", "2"], "--ray-workers needs --ray"),
        (["--ray-address", "auto"], "--ray-address needs --ray"),
        (["--ray-worker-concurrency", "3"], "--ray-worker-concurrency needs --ray"),
        (["--ray", "--ray-address", " "], "--ray-address must be auto, ray://HOST:PORT or"),
    ],
)
def test_ray_options_are_checked(options: list[str], message: str, tmp_path: Path) -> None:
    code, output = run(*options, "-o", tmp_path / "out.jsonl")
    assert code == 2
    assert output.startswith(f"Error: {message}")


@pytest.mark.parametrize("option", ["--ray-workers", "--ray-worker-concurrency"])
def test_ray_counts_must_be_positive(option: str) -> None:
    code, output = run("--ray", option, "0")
    assert code == 2
    assert "0 is not in the range x>=1" in output


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"address": ""}, ValueError, "address must be a non-empty string or None"),
        ({"workers": 0}, ValueError, "workers must be a positive integer or None"),
        ({"workers": True}, ValueError, "workers must be a positive integer or None"),
        ({"worker_concurrency": 0}, ValueError, "worker_concurrency must be a positive integer"),
        ({"bundle": b"bytes"}, TypeError, "bundle must be a benchmax.bundle.Bundle or None"),
        ({"constructor_args": [("a", 1)]}, TypeError, "constructor_args must be a mapping"),
        ({"env_attributes": {1: 2}}, TypeError, "env_attributes must be a mapping with string"),
        ({"worker_options": None}, TypeError, "worker_options must be a mapping"),
        ({"worker_start_timeout": 0}, ValueError, "worker_start_timeout must be a positive"),
        ({"worker_start_timeout": "9"}, ValueError, "worker_start_timeout must be a positive"),
        (
            {"max_worker_replacements": -1},
            ValueError,
            "max_worker_replacements must be a non-negative integer or None",
        ),
    ],
)
def test_ray_executor_validates_its_arguments(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{message}"):
        RayExecutor(**arguments)  # type: ignore[arg-type]


def test_ray_executor_repr_hides_the_bundle_and_constructor_arguments() -> None:
    executor = RayExecutor(
        workers=2, bundle=dump_bundle(NumberEnv), constructor_args={"token": "sk-hidden"}
    )
    assert "sk-hidden" not in repr(executor) and "pickled" not in repr(executor)
    assert repr(executor).startswith("RayExecutor(address=None, workers=2, worker_concurrency=4")
    assert executor.where == "a local Ray instance" and executor.starts_local
    assert RayExecutor(address="ray://head:10001").where == "cluster ray://head:10001"


def test_ray_address_falls_back_to_the_ray_address_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert RayExecutor().where == "cluster 10.1.2.3:6379"
    assert not RayExecutor().starts_local
    assert RayExecutor(address="auto").where == "cluster auto"


CHECK = textwrap.dedent(
    """
    import importlib.abc, sys

    class RefuseRay(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "ray":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    if sys.argv[1] == "blocked":
        sys.meta_path.insert(0, RefuseRay())
    import benchmax, benchmax.runner, benchmax.cli
    from benchmax.runner import RayExecutor
    assert "ray" not in sys.modules, "importing benchmax imported ray"
    RayExecutor(workers=1)
    print("ok")
    """
)


@pytest.mark.parametrize("ray", ["blocked", "installed"])
def test_importing_benchmax_never_imports_ray(ray: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", CHECK, ray], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "ok\n"
