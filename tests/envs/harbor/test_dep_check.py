"""The lazy Harbor dependency check and the adapter's import surface."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from harbor.models.job.config import DatasetConfig

import benchmax.envs.harbor as harbor_adapter
from benchmax.envs.harbor import HarborDataset, HarborEnv, dep_check
from benchmax.envs.harbor.dep_check import require_harbor

MESSAGE = (
    "HarborEnv requires the optional Harbor dependency; install `benchmax[harbor]` plus "
    "the selected sandbox provider extra"
)
PUBLIC_NAMES = [
    "BundledAgentSource",
    "BundledHarborAgent",
    "CustomSandboxCredentials",
    "DaytonaCredentials",
    "HarborDataset",
    "HarborEnv",
    "HarborTrialTemplate",
    "ModalCredentials",
    "SandboxCredentials",
]


def test_package_exports_exactly_the_nine_names_from_their_defining_modules() -> None:
    assert harbor_adapter.__all__ == PUBLIC_NAMES
    defining = {
        "BundledAgentSource": "bundled_agent",
        "BundledHarborAgent": "bundled_agent",
        "CustomSandboxCredentials": "credentials",
        "DaytonaCredentials": "credentials",
        "HarborDataset": "dataset",
        "HarborEnv": "env",
        "HarborTrialTemplate": "types",
        "ModalCredentials": "credentials",
        "SandboxCredentials": "credentials",
    }
    for name, module in defining.items():
        assert getattr(harbor_adapter, name).__module__ == f"benchmax.envs.harbor.{module}"
    assert not hasattr(harbor_adapter, "sandbox_credentials_scope")


def test_sandbox_credentials_scope_is_importable_but_not_public() -> None:
    from benchmax.envs.harbor import credentials
    from benchmax.envs.harbor.credentials import sandbox_credentials_scope

    assert sandbox_credentials_scope.__module__ == "benchmax.envs.harbor.credentials"
    assert "sandbox_credentials_scope" not in credentials.__all__


def test_env_logger_is_named_after_its_module() -> None:
    from benchmax.envs.harbor import env

    assert env.logger.name == "benchmax.envs.harbor.env"


def test_require_harbor_returns_none_when_installed() -> None:
    assert require_harbor() is None


def test_missing_harbor_raises_friendly_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "harbor", None)
    with pytest.raises(ImportError) as caught:
        require_harbor()
    assert str(caught.value) == MESSAGE
    assert type(caught.value) is ImportError
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ is True


def test_missing_sub_dependency_reraises_the_original_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = ModuleNotFoundError("No module named 'litellm'", name="litellm")

    def import_module(name: str) -> None:
        raise original

    monkeypatch.setattr(dep_check, "importlib", SimpleNamespace(import_module=import_module))
    with pytest.raises(ModuleNotFoundError) as caught:
        require_harbor()
    assert caught.value is original


async def test_env_and_dataset_creation_require_harbor_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dataset = DatasetConfig(path=tmp_path)
    monkeypatch.setitem(sys.modules, "harbor", None)
    # HarborEnv checks the dependency before any other validation (all arguments are wrong here).
    with pytest.raises(ImportError, match=r"benchmax\[harbor\]") as caught:
        HarborEnv(dataset=None, trial=None, reward_keys="reward")  # type: ignore[arg-type]
    assert str(caught.value) == MESSAGE
    with pytest.raises(ImportError) as caught:
        await HarborDataset.create(dataset, base_dir=tmp_path / "snap")
    assert str(caught.value) == MESSAGE
    assert not (tmp_path / "snap").exists()
