"""The public module map of ``benchmax.auth`` and ``benchmax.envs`` (spec section 1)."""

from __future__ import annotations

import importlib
import json
import logging
import subprocess
import sys
import textwrap

import pytest

ALL = {
    "benchmax.auth": [
        "InjectedAuth",
        "ModelAuth",
        "ModelRequestContext",
        "StaticBearerAuth",
        "bind_model_auth",
    ],
    "benchmax.envs": [
        "BaseEnv",
        "BaseRollout",
        "Dataset",
        "DatasetSplit",
        "Example",
        "Environment",
        "JsonRow",
        "JsonlDataset",
        "InjectedAuth",
        "Message",
        "Messages",
        "ModelAuth",
        "RewardMap",
        "RolloutAttempt",
        "RolloutFailure",
        "RolloutOutcome",
        "RolloutRequest",
        "Tool",
        "StaticBearerAuth",
        "bind_model_auth",
        "canonical_example_id",
    ],
    "benchmax.envs.shared_types": [
        "DatasetSplit",
        "Example",
        "RewardMap",
        "RolloutAttempt",
        "RolloutFailure",
        "RolloutOutcome",
        "RolloutRequest",
    ],
    "benchmax.envs.dataset": ["Dataset"],
    "benchmax.envs.identity": ["canonical_example_id"],
    "benchmax.envs.logging": [
        "rollout_context",
        "group_context",
        "_CURRENT_ROLLOUT_ID",
        "_CURRENT_GROUP_RIDS",
    ],
    "benchmax.envs.environment": ["Environment"],
    "benchmax.envs.base": [
        "BaseEnv",
        "BaseRollout",
        "JsonRow",
        "JsonlDataset",
        "Message",
        "Messages",
        "Tool",
        "resolve_dataset_path",
    ],
    "benchmax.envs.base.env": ["BaseEnv", "BaseRollout"],
    "benchmax.envs.base.dataset": ["JsonRow", "JsonlDataset", "resolve_dataset_path"],
    "benchmax.envs.base.openai_types": ["Message", "Messages", "Tool"],
}

DEFINED_IN = {
    "benchmax.auth": [
        "ModelRequestContext",
        "ModelAuth",
        "StaticBearerAuth",
        "InjectedAuth",
        "bind_model_auth",
    ],
    "benchmax.envs.shared_types": [
        "Example",
        "RolloutRequest",
        "RolloutAttempt",
        "RolloutOutcome",
        "RolloutFailure",
    ],
    "benchmax.envs.dataset": ["Dataset"],
    "benchmax.envs.environment": ["Environment"],
    "benchmax.envs.base.env": ["BaseEnv", "BaseRollout"],
    "benchmax.envs.base.dataset": ["JsonlDataset", "resolve_dataset_path"],
    "benchmax.envs.identity": ["canonical_example_id"],
}


@pytest.mark.parametrize("module_name", sorted(ALL))
def test_all_is_exact_and_ordered(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert list(module.__all__) == ALL[module_name]
    for name in module.__all__:
        assert hasattr(module, name), name


@pytest.mark.parametrize(
    ("module_name", "name"),
    [(module, name) for module, names in DEFINED_IN.items() for name in names],
)
def test_defining_module(module_name: str, name: str) -> None:
    value = getattr(importlib.import_module(module_name), name)
    assert value.__module__ == module_name
    assert value.__qualname__ == name


def test_aliases_live_in_shared_types() -> None:
    shared_types = importlib.import_module("benchmax.envs.shared_types")
    assert shared_types.RewardMap.__module__ == "benchmax.envs.shared_types"


def test_reexports_are_the_same_objects() -> None:
    envs = importlib.import_module("benchmax.envs")
    for module_name, names in ALL.items():
        if module_name == "benchmax.envs":
            continue
        module = importlib.import_module(module_name)
        for name in names:
            if name in envs.__all__:
                assert getattr(envs, name) is getattr(module, name), (module_name, name)
    base = importlib.import_module("benchmax.envs.base")
    for submodule in ("env", "dataset", "openai_types"):
        module = importlib.import_module(f"benchmax.envs.base.{submodule}")
        for name in module.__all__:
            assert getattr(base, name) is getattr(module, name), (submodule, name)


def test_names_not_reexported_by_envs() -> None:
    envs = importlib.import_module("benchmax.envs")
    assert not hasattr(envs, "ModelRequestContext")
    assert not hasattr(envs, "resolve_dataset_path")


def test_abstract_member_sets() -> None:
    from benchmax.envs import BaseEnv, Environment

    assert Environment.__abstractmethods__ == frozenset(
        {"reward_keys", "create_dataset", "run_rollout"}
    )
    assert BaseEnv.__abstractmethods__ == frozenset({"reward_keys", "create_dataset"})


def test_removed_surfaces_stay_removed() -> None:
    for module_name in ("benchmax.rubrics", "benchmax.envs.reward_helpers", "benchmax.prompts"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(module_name)
    for module_name in ("benchmax.envs", "benchmax.envs.dataset", "benchmax.envs.base"):
        assert not hasattr(importlib.import_module(module_name), "FrozenDataset")


def test_package_modules_use_the_standard_logging() -> None:
    environment = importlib.import_module("benchmax.envs.environment")
    assert environment.logging is logging
    assert environment.logger.name == "benchmax.envs.environment"


def imported_modules(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter and return the ``benchmax``/``openai`` modules."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import json, sys
        print(json.dumps(sorted(
            m for m in sys.modules if m.split(".")[0] in {"benchmax", "openai", "harbor"}
        )))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_dependencies_in_a_fresh_interpreter() -> None:
    auth_only = imported_modules("import benchmax.auth")
    assert "benchmax.auth" in auth_only
    assert not [m for m in auth_only if m.startswith("benchmax.envs")]

    envs = imported_modules("import benchmax.envs")
    for required in (
        "benchmax.envs.base",
        "benchmax.envs.dataset",
        "benchmax.envs.environment",
        "benchmax.envs.identity",
        "benchmax.envs.shared_types",
    ):
        assert required in envs
    # BaseEnv's model calls need neither the OpenAI SDK nor an HTTP client at import
    # time (issue 10 amends envs.md §1.2: the SDK import alone costs most of a second).
    assert "openai" not in envs
    assert not [m for m in envs if m.startswith(("benchmax.envs.harbor", "benchmax.rewards"))]
    assert "harbor" not in envs


def test_envs_import_without_harbor_installed() -> None:
    modules = imported_modules(
        """
        import importlib.abc, sys

        class NoHarbor(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "harbor" or name.startswith("harbor."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, NoHarbor())
        import benchmax
        import benchmax.envs
        from benchmax.envs import BaseEnv, Environment, canonical_example_id
        """
    )
    assert "benchmax.envs" in modules
