"""The core library works without Harbor installed.

The fast check runs a fresh ``python -I`` interpreter whose import system refuses
Harbor and every package only Harbor brings (so an accidental dependency on one
of them fails loudly). The slow check builds a real virtual environment holding
only benchmax's core dependency closure, installed offline from uv's cache.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

SRC = Path(__file__).resolve().parents[1] / "src"

# Harbor itself plus the import names of packages that only Harbor depends on.
HARBOR_ONLY = (
    "harbor",
    "litellm",
    "shortuuid",
    "typer",
    "requests",
    "yaml",
    "toml",
    "tenacity",
    "dotenv",
    "jinja2",
    "dirhash",
    "fastapi",
    "uvicorn",
    "pathspec",
    "supabase",
    "filelock",
    "platformdirs",
    "jwt",
)

CHECK = textwrap.dedent(
    r"""
    import asyncio
    import importlib
    import importlib.abc
    import os
    import sys

    BLOCKED = set(sys.argv[1].split(",")) if len(sys.argv) > 1 and sys.argv[1] else set()


    class RefuseHarbor(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    if BLOCKED:
        sys.meta_path.insert(0, RefuseHarbor())
    try:
        import harbor  # noqa: F401
    except ModuleNotFoundError as error:
        assert error.name == "harbor", error.name
    else:
        raise AssertionError("harbor must not be importable in this check")

    import benchmax
    import benchmax.envs
    from benchmax.auth import StaticBearerAuth
    from benchmax.envs import Dataset, Environment, Example, RolloutAttempt, RolloutRequest

    for optional in ("benchmax.rewards", "benchmax.bundle"):
        try:
            importlib.import_module(optional)
        except ModuleNotFoundError as error:
            if error.name != optional:
                raise


    class Tiny(Environment):
        @property
        def reward_keys(self):
            return ("reward",)

        async def create_dataset(self, split, base_dir):
            return Dataset([Example(id="only", payload=2)])

        async def run_rollout(self, request):
            return RolloutAttempt(
                rollout_id=request.rollout_id,
                termination_reason="finished",
                rewards={"reward": float(request.example.payload)},
            )


    async def run_tiny_group():
        env = Tiny()
        example = (await env.create_dataset("train", "."))[0]
        requests = [
            RolloutRequest(
                rollout_id=f"r{index}",
                example=example,
                model="m",
                base_url="http://127.0.0.1:1/v1",
                model_auth=StaticBearerAuth("token"),
            )
            for index in range(2)
        ]
        outcomes = await env.run_group(requests)
        assert {key: value.rewards for key, value in outcomes.items()} == {
            "r0": {"reward": 2.0},
            "r1": {"reward": 2.0},
        }

    asyncio.run(run_tiny_group())

    # The adapter imports, and everything that needs no Harbor works.
    import benchmax.envs.harbor as adapter
    from benchmax.envs.harbor import (
        BundledAgentSource,
        BundledHarborAgent,
        CustomSandboxCredentials,
        DaytonaCredentials,
        HarborDataset,
        HarborEnv,
        HarborTrialTemplate,
        ModalCredentials,
        SandboxCredentials,
    )
    from benchmax.envs.harbor.credentials import sandbox_credentials_scope
    from benchmax.envs.harbor.dep_check import require_harbor

    assert len(adapter.__all__) == 9
    credentials = ModalCredentials("id", "secret", max_throttle_wait_seconds=5)
    assert isinstance(credentials, SandboxCredentials)
    DaytonaCredentials(api_key="key")
    CustomSandboxCredentials({"X": "y"})


    async def scoped():
        async with sandbox_credentials_scope(credentials):
            assert os.environ["MODAL_MAX_THROTTLE_WAIT"] == "5"
        assert "MODAL_TOKEN_ID" not in os.environ

    asyncio.run(scoped())
    HarborTrialTemplate(agent=object(), environment=object(), verifier=object())
    source = BundledAgentSource.from_files({"agent.py": b"x"})
    assert source.content_id.startswith("sha256:")
    train, evaluation = HarborDataset(
        [Example(id="b", payload=None), Example(id="a", payload=None)]
    ).train_eval_split(0.5)
    assert [e.id for e in evaluation] == ["a"] and [e.id for e in train] == ["b"]

    MESSAGE = (
        "HarborEnv requires the optional Harbor dependency; "
        "install `benchmax[harbor]` plus the selected sandbox provider extra"
    )
    for attempt in (
        lambda: require_harbor(),
        lambda: HarborEnv(dataset=None, trial=None, reward_keys=()),
        lambda: asyncio.run(HarborDataset.create(object(), base_dir="never-created")),
    ):
        try:
            attempt()
        except ImportError as error:
            assert type(error) is ImportError, type(error)
            assert str(error) == MESSAGE, str(error)
            assert error.__cause__ is None and error.__suppress_context__
        else:
            raise AssertionError("expected the missing-Harbor ImportError")
    assert not os.path.exists("never-created")
    try:
        BundledHarborAgent(object(), source)
    except ModuleNotFoundError as error:
        assert error.name.partition(".")[0] == "harbor", error.name
    else:
        raise AssertionError("BundledHarborAgent needs Harbor")

    leaked = sorted(name for name in sys.modules if name.partition(".")[0] in BLOCKED)
    assert not leaked, leaked
    print("CORE-WITHOUT-HARBOR-OK")
    """
)


def _run_check(python: str, blocked: tuple[str, ...], cwd: Path) -> None:
    completed = subprocess.run(
        [python, "-I", "-c", CHECK, ",".join(blocked)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={key: value for key, value in os.environ.items() if not key.startswith("PYTHON")},
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().endswith("CORE-WITHOUT-HARBOR-OK"), completed.stdout


def test_core_works_when_harbor_cannot_be_imported(tmp_path: Path) -> None:
    _run_check(sys.executable, HARBOR_ONLY, tmp_path)


def _core_closure() -> dict[str, str]:
    """Pinned ``name -> version`` of benchmax's non-extra dependency closure, as installed."""
    pins: dict[str, str] = {}
    pending = ["benchmax"]
    while pending:
        distribution = importlib.metadata.distribution(pending.pop())
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            name = requirement.name.lower().replace("_", "-")
            if name in pins:
                continue
            try:
                pins[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue  # an optional-on-this-platform dependency that is not installed
            pending.append(name)
    return pins


@pytest.mark.slow
def test_core_works_in_a_real_environment_without_harbor(tmp_path: Path) -> None:
    """A real venv with only the core closure (offline from uv's cache; about a second)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not available")
    pins = _core_closure()
    assert "harbor" not in pins and "litellm" not in pins
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    requirements = [f"{name}=={version}" for name, version in sorted(pins.items())]
    installed = subprocess.run(
        [uv, "pip", "install", "-q", "--offline", "--no-deps", "--python", python, *requirements],
        capture_output=True,
        text=True,
    )
    if installed.returncode != 0:
        pytest.skip(f"core wheels are not all in uv's cache: {installed.stderr[-500:]}")
    site_packages = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (site_packages / "benchmax_source.pth").write_text(f"{SRC}\n")
    _run_check(python, (), tmp_path)
