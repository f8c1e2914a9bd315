"""``dump_bundle`` validation order, messages, recorded metadata and registration hygiene."""

from __future__ import annotations

import logging
import sys
import threading
from collections import namedtuple
from pathlib import Path

import cloudpickle
import pytest
from tests.bundle.conftest import Project, ProjectFactory, plain_env_module

import benchmax.bundle
from benchmax.bundle import BundlingError, dump_bundle, load_bundle
from benchmax.envs.base.env import BaseEnv
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import Example

_VersionInfo = namedtuple("_VersionInfo", "major minor micro releaselevel serial")


def concrete_base_env() -> type[BaseEnv]:
    class LocalEnv(BaseEnv):
        reward_keys = ("score",)
        max_turns = 1

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return Dataset([Example(id="e", payload={"prompt_messages": []})])

    return LocalEnv


class HalfEnv(Environment):
    async def run_rollout(self, request):  # pragma: no cover - never run
        raise NotImplementedError


@pytest.fixture
def minimal_project(projects: ProjectFactory) -> Project:
    return projects.create(
        "minimal", {"minimal_env.py": plain_env_module("MinimalEnv")}, src_layout=False
    )


def test_python_313_is_refused_first(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(sys, "version_info", _VersionInfo(3, 13, 4, "final", 0))
        with pytest.raises(BundlingError) as caught:
            dump_bundle(int)  # type: ignore[arg-type]
    assert str(caught.value) == "Python 3.13.4 is unsupported. Use Python 3.12 or >= 3.14."


@pytest.mark.parametrize(
    ("env_class", "message"),
    [
        (int, "<class 'int'> does not implement Environment."),
        ("x", "'x' does not implement Environment."),
        (Environment, "Cannot bundle the Environment protocol; provide a concrete implementation."),
        (BaseEnv, "BaseEnv has unimplemented abstract methods: create_dataset, reward_keys"),
        (HalfEnv, "HalfEnv has unimplemented abstract methods: create_dataset, reward_keys"),
    ],
)
def test_env_class_checks(env_class: object, message: str) -> None:
    with pytest.raises(BundlingError) as caught:
        dump_bundle(env_class, pip_dependencies="not even a list")  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_invalid_dependencies_fail_before_anything_is_pickled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail() -> str:
        raise AssertionError("version looked up before dependencies were validated")

    monkeypatch.setattr("benchmax.bundle._benchmax_version", fail)
    monkeypatch.setattr(cloudpickle, "dumps", fail)
    with pytest.raises(BundlingError, match=r"Invalid pip_dependencies.*PEP 508") as caught:
        dump_bundle(concrete_base_env(), pip_dependencies=["not a requirement ???"])
    assert str(caught.value) == (
        "Invalid pip_dependencies: dependency at index 0 is not valid PEP 508: "
        "'not a requirement ???'"
    )
    assert isinstance(caught.value.__cause__, ValueError)
    with pytest.raises(BundlingError, match="Invalid pip_dependencies: pip dependencies must"):
        dump_bundle(concrete_base_env(), pip_dependencies="requests>=2")  # type: ignore[arg-type]
    with pytest.raises(BundlingError, match="declared more than once"):
        dump_bundle(concrete_base_env(), pip_dependencies=["a", "A"])


def test_unknown_runtime_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "unknown")
    with pytest.raises(BundlingError) as caught:
        dump_bundle(concrete_base_env())
    assert str(caught.value).startswith("Cannot determine the BenchMax package version")


def test_patched_version_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "0.2.77")
    assert dump_bundle(concrete_base_env()).metadata.benchmax_version == "0.2.77"


def test_metadata_and_payload_of_a_function_local_class(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env_class = concrete_base_env()
    with caplog.at_level(logging.INFO, logger="benchmax.bundle"):
        bundle = dump_bundle(env_class, constructor_args={}, pip_dependencies=("Requests >= 2",))

    assert bundle.metadata.python_version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert bundle.metadata.benchmax_version == benchmax.bundle._benchmax_version()
    assert bundle.metadata.pip_dependencies == ("requests>=2",)
    assert "class LocalEnv(BaseEnv):" in (bundle.metadata.env_class_source or "")
    loaded_class, loaded_args = cloudpickle.loads(bundle.pickled)
    assert loaded_class.__name__ == "LocalEnv" and loaded_args == {}
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert [r.name for r in infos] == ["benchmax.bundle"]
    assert "dumped LocalEnv" in infos[0].getMessage()
    assert "1 pip deps" in infos[0].getMessage()


@pytest.mark.parametrize("falsy", [None, {}, 0, ""])
def test_falsy_constructor_args_become_a_fresh_dict(falsy: object) -> None:
    env_class = concrete_base_env()
    bundle = dump_bundle(env_class, constructor_args=falsy)  # type: ignore[arg-type]
    assert bundle.pickled == cloudpickle.dumps((env_class, {}))


def test_constructor_args_are_pickled_and_passed_on_load() -> None:
    env_class = concrete_base_env()
    bundle = dump_bundle(env_class, constructor_args={"max_turns": 3})
    env = load_bundle(bundle)
    assert isinstance(env, env_class) and env.max_turns == 3


def test_source_is_recorded_from_the_defining_file(minimal_project: Project) -> None:
    module = minimal_project.module("minimal_env")
    bundle = dump_bundle(module.MinimalEnv, local_modules=[module])
    assert bundle.metadata.env_class_source is not None
    assert "class MinimalEnv" in bundle.metadata.env_class_source


@pytest.mark.parametrize("override", ["shown instead", ""])
def test_explicit_source_is_recorded_verbatim(minimal_project: Project, override: str) -> None:
    module = minimal_project.module("minimal_env")
    bundle = dump_bundle(module.MinimalEnv, env_class_source=override)
    assert bundle.metadata.env_class_source == override


def test_non_string_source_override_is_a_type_error(minimal_project: Project) -> None:
    module = minimal_project.module("minimal_env")
    with pytest.raises(TypeError, match="env_class_source must be a string or None"):
        dump_bundle(module.MinimalEnv, env_class_source=b"x")  # type: ignore[arg-type]


def _exec_generated_class() -> type:
    namespace = {"__name__": "__modal_generated_env__"}
    exec(plain_env_module("GeneratedEnv"), namespace)
    return namespace["GeneratedEnv"]


def test_get_source_is_none_for_exec_generated_classes(caplog: pytest.LogCaptureFixture) -> None:
    generated = _exec_generated_class()
    with caplog.at_level(logging.DEBUG, logger="benchmax.bundle"):
        assert benchmax.bundle._get_source(generated) is None
    assert any("no source for GeneratedEnv" in r.getMessage() for r in caplog.records)
    assert "class HalfEnv(Environment)" in (benchmax.bundle._get_source(HalfEnv) or "")


def test_exec_generated_class_bundles_with_and_without_override() -> None:
    generated = _exec_generated_class()
    assert dump_bundle(generated).metadata.env_class_source is None
    override = dump_bundle(generated, env_class_source="class GeneratedEnv: ...")
    assert override.metadata.env_class_source == "class GeneratedEnv: ..."
    assert type(load_bundle(override)).__name__ == "GeneratedEnv"


def test_patched_get_source_seam_is_used(
    monkeypatch: pytest.MonkeyPatch, minimal_project: Project
) -> None:
    monkeypatch.setattr("benchmax.bundle._get_source", lambda env_class: "patched")
    module = minimal_project.module("minimal_env")
    assert dump_bundle(module.MinimalEnv).metadata.env_class_source == "patched"


# --- by-value registration never outlives a call ------------------------------------------


def test_local_module_in_sys_modules_leaves_no_registration(minimal_project: Project) -> None:
    module = minimal_project.module("minimal_env")
    bundle = dump_bundle(module.MinimalEnv, local_modules=[module])
    assert "minimal_env" not in cloudpickle.list_registry_pickle_by_value()
    assert type(load_bundle(bundle)).__name__ == "MinimalEnv"


def test_non_module_entry_is_rejected_and_earlier_entries_unregistered(
    minimal_project: Project,
) -> None:
    module = minimal_project.module("minimal_env")
    with pytest.raises(BundlingError) as caught:
        dump_bundle(module.MinimalEnv, local_modules=[module, "x"])  # type: ignore[list-item]
    assert str(caught.value) == "local_modules must contain module objects, got str: 'x'"
    assert "minimal_env" not in cloudpickle.list_registry_pickle_by_value()


def test_unimported_module_is_refused_by_cloudpickle_without_leaks(
    minimal_project: Project,
) -> None:
    import types

    module = minimal_project.module("minimal_env")
    stray = types.ModuleType("never_imported_anywhere")
    with pytest.raises(ValueError, match="was not imported correctly"):
        dump_bundle(module.MinimalEnv, local_modules=[module, stray])
    assert "minimal_env" not in cloudpickle.list_registry_pickle_by_value()


def test_serialization_failure_leaves_no_registration(minimal_project: Project) -> None:
    module = minimal_project.module("minimal_env")
    with pytest.raises(BundlingError, match=r"^Failed to serialize MinimalEnv: ") as caught:
        dump_bundle(
            module.MinimalEnv,
            constructor_args={"lock": threading.Lock()},
            local_modules=[module],
        )
    assert caught.value.__cause__ is not None
    assert "minimal_env" not in cloudpickle.list_registry_pickle_by_value()


def test_failed_check_after_auto_capture_leaves_no_registration(
    projects: ProjectFactory,
) -> None:
    project = projects.create(
        "leaky",
        {
            "leaky_pkg/__init__.py": "",
            "leaky_pkg/helper.py": "VALUE = 1\n",
            "leaky_pkg/env.py": plain_env_module(
                "LeakyEnv",
                footer=(
                    "\ndef _peek(self):\n    import leaky_pkg.helper\n\n\nLeakyEnv.peek = _peek\n"
                ),
            ),
        },
    )
    module = project.module("leaky_pkg.env")
    with pytest.raises(BundlingError, match="delayed import"):
        dump_bundle(module.LeakyEnv)
    assert not {"leaky_pkg.env", "leaky_pkg.helper"} & cloudpickle.list_registry_pickle_by_value()


def test_prior_global_registration_is_restored(minimal_project: Project) -> None:
    module = minimal_project.module("minimal_env")
    cloudpickle.register_pickle_by_value(module)
    try:
        dump_bundle(module.MinimalEnv, local_modules=[module])
        assert "minimal_env" in cloudpickle.list_registry_pickle_by_value()
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def test_project_roots_ignore_non_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    real = benchmax.bundle._project_root_for_module

    def spy(module: object) -> Path | None:
        seen.append(module)
        return real(module)

    monkeypatch.setattr("benchmax.bundle._project_root_for_module", spy)
    with pytest.raises(BundlingError, match="got int: 7"):
        dump_bundle(concrete_base_env(), local_modules=[7])  # type: ignore[list-item]
    assert seen == [sys.modules[__name__]]


def test_concurrent_dumps_do_not_see_each_others_registrations(
    projects: ProjectFactory,
) -> None:
    modules = []
    for index in range(4):
        name = f"parallel_env_{index}"
        projects.create(f"parallel-{index}", {f"{name}.py": plain_env_module(f"Parallel{index}")})
        modules.append(pytest.importorskip(name))
    expected = [dump_bundle(getattr(m, f"Parallel{i}")).pickled for i, m in enumerate(modules)]
    results: dict[int, bytes] = {}
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for _ in range(3):
                env_class = getattr(modules[index], f"Parallel{index}")
                results[index] = dump_bundle(env_class).pickled
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [results[i] for i in range(4)] == expected


def test_unknown_version_is_refused_before_anything_is_pickled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("pickled before the version check")

    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "unknown")
    monkeypatch.setattr(cloudpickle, "dumps", never)
    with pytest.raises(BundlingError, match=r"^Cannot determine the BenchMax package version"):
        dump_bundle(concrete_base_env(), local_modules=["not checked yet"])  # type: ignore[list-item]
