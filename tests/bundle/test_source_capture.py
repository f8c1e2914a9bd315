"""Automatic and explicit capture of local source, and the checks that refuse the rest."""

from __future__ import annotations

import logging
import pickle

import cloudpickle
import pytest
from tests.bundle.conftest import Project, ProjectFactory, plain_env_module

from benchmax.bundle import BundlingError, dump_bundle, load_bundle, unregistered_local_refs


def test_src_layout_project_is_captured_with_its_helper(
    chat_project: Project, caplog: pytest.LogCaptureFixture
) -> None:
    env_module = chat_project.module("chat_pkg.env")
    with caplog.at_level(logging.WARNING, logger="benchmax.bundle"):
        bundle = dump_bundle(env_module.ChatEnv)

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "chat_pkg.env" in warnings[0] and "chat_pkg.helper" not in warnings[0]
    assert "chat_pkg.helper" in warnings[1]
    assert all(r.name == "benchmax.bundle" for r in caplog.records)
    assert unregistered_local_refs(bundle.pickled) == []


def test_module_objects_are_pickled_by_value_not_by_name(chat_project: Project) -> None:
    env_module = chat_project.module("chat_pkg.env")
    by_reference = cloudpickle.dumps(env_module.ChatEnv)

    assert unregistered_local_refs(by_reference) == ["chat_pkg.env"]
    assert unregistered_local_refs(dump_bundle(env_module.ChatEnv).pickled) == []


def test_single_file_project_strict_mode_names_the_missing_module(
    single_file_project: Project,
) -> None:
    module = single_file_project.module("strict_env")

    with pytest.raises(BundlingError, match=r"local_modules=.*strict_env") as caught:
        dump_bundle(module.EditableEnv, auto_local_modules=False)
    assert str(caught.value) == "EditableEnv: missing local_modules=[strict_env]"
    # Declaring the project's own distribution does not make its source remote.
    with pytest.raises(BundlingError, match=r"missing local_modules=\[strict_env\]"):
        dump_bundle(
            module.EditableEnv, auto_local_modules=False, pip_dependencies=["strict-env==1.0.0"]
        )
    assert dump_bundle(module.EditableEnv).pickled


def test_strict_mode_lists_explicit_modules_already_registered(projects: ProjectFactory) -> None:
    projects.create(
        "two-modules",
        {
            "two_mod/__init__.py": "",
            "two_mod/helper.py": "VALUE = 3\n",
            "two_mod/env.py": plain_env_module(
                "TwoEnv", header="from two_mod import helper\n"
            ).replace('{"score": 1.0}', '{"score": float(helper.VALUE)}'),
        },
    )
    env = pytest.importorskip("two_mod.env")
    helper = pytest.importorskip("two_mod.helper")

    with pytest.raises(BundlingError) as caught:
        dump_bundle(env.TwoEnv, local_modules=[helper], auto_local_modules=False)
    assert str(caught.value) == (
        "TwoEnv: missing local_modules=[two_mod.env] (already registered: [two_mod.helper])"
    )
    bundle = dump_bundle(env.TwoEnv, local_modules=[env, helper], auto_local_modules=False)
    assert unregistered_local_refs(bundle.pickled) == []


def test_source_from_a_sibling_project_is_refused(
    sibling_projects: tuple[Project, Project],
) -> None:
    env_module = sibling_projects[0].module("sibling_env.env")

    with pytest.raises(BundlingError, match="sibling_helpers") as caught:
        dump_bundle(env_module.SiblingEnv)
    assert str(caught.value).startswith(
        "SiblingEnv: referenced source outside the environment project: sibling_helpers.helper. "
    )
    assert "local_modules" in str(caught.value) and "pip_dependencies" in str(caught.value)


def test_declared_sibling_distribution_stays_a_remote_reference(
    sibling_projects: tuple[Project, Project],
) -> None:
    env_module = sibling_projects[0].module("sibling_env.env")

    bundle = dump_bundle(env_module.SiblingEnv, pip_dependencies=["sibling-helpers==1.0.0"])

    assert bundle.metadata.pip_dependencies == ("sibling-helpers==1.0.0",)
    assert unregistered_local_refs(bundle.pickled) == ["sibling_helpers.helper"]


def test_sibling_module_passed_in_local_modules_is_captured(
    sibling_projects: tuple[Project, Project],
) -> None:
    env_module = sibling_projects[0].module("sibling_env.env")
    helper = sibling_projects[1].module("sibling_helpers.helper")

    bundle = dump_bundle(env_module.SiblingEnv, local_modules=[helper])

    assert unregistered_local_refs(bundle.pickled) == []
    assert "sibling_helpers.helper" not in cloudpickle.list_registry_pickle_by_value()


LOCAL_IMPORT_ENV = plain_env_module(
    "LocalImportEnv",
    footer="""
def _score(self):
{body}


LocalImportEnv.score = {wrap}(_score)
""",
)


def _local_import_project(projects: ProjectFactory, body: str, wrap: str = "") -> Project:
    env_source = LOCAL_IMPORT_ENV.replace("{body}", body).replace("{wrap}", wrap)
    if "await" in body:
        env_source = env_source.replace("def _score", "async def _score")
    return projects.create(
        "local-import",
        {
            "local_import_pkg/__init__.py": "",
            "local_import_pkg/helper.py": "VALUE = 1.0\n",
            "local_import_pkg/env.py": env_source,
        },
    )


@pytest.mark.parametrize(
    "body",
    [
        "    import local_import_pkg.helper as helper\n    return helper.VALUE",
        '    import importlib\n    return importlib.import_module("local_import_pkg.helper").VALUE',
        '    return __import__("local_import_pkg.helper").helper.VALUE',
    ],
    ids=["import-statement", "importlib", "dunder-import"],
)
def test_method_local_import_of_local_source_is_refused(
    projects: ProjectFactory, body: str
) -> None:
    project = _local_import_project(projects, body)
    env_module = project.module("local_import_pkg.env")
    helper = project.module("local_import_pkg.helper")

    with pytest.raises(BundlingError, match=r"delayed import.*local_import_pkg\.helper") as caught:
        dump_bundle(env_module.LocalImportEnv)
    assert str(caught.value).startswith(
        "LocalImportEnv: delayed import of local source cannot be captured safely: "
    )
    with pytest.raises(BundlingError, match=r"delayed import.*local_import_pkg\.helper"):
        dump_bundle(env_module.LocalImportEnv, local_modules=[helper])
    with pytest.raises(BundlingError, match=r"delayed import.*local_import_pkg\.helper"):
        dump_bundle(env_module.LocalImportEnv, local_modules=[env_module, helper])


@pytest.mark.parametrize(
    ("body", "wrap"),
    [
        ("    def inner():\n        import local_import_pkg.helper\n    return inner", ""),
        ("    return lambda: __import__('local_import_pkg.helper')", ""),
        ("    return [__import__('local_import_pkg.helper') for _ in ()]", ""),
        ("    import local_import_pkg.helper", "property"),
        ("    import local_import_pkg.helper", "staticmethod"),
        ("    import local_import_pkg.helper", "classmethod"),
        ("    await __import__('asyncio').sleep(0)\n    import local_import_pkg.helper", ""),
    ],
    ids=["nested-function", "lambda", "comprehension", "property", "static", "class", "async"],
)
def test_delayed_imports_are_found_in_every_reachable_code_object(
    projects: ProjectFactory, body: str, wrap: str
) -> None:
    project = _local_import_project(projects, body, wrap)
    env_module = project.module("local_import_pkg.env")

    with pytest.raises(BundlingError, match=r"safely: local_import_pkg\.helper\. "):
        dump_bundle(env_module.LocalImportEnv)


def test_delayed_imports_are_found_through_globals_defaults_and_closures(
    projects: ProjectFactory,
) -> None:
    project = projects.create(
        "reach",
        {
            "reach_pkg/__init__.py": "",
            "reach_pkg/a.py": "",
            "reach_pkg/b.py": "",
            "reach_pkg/c.py": "",
            "reach_pkg/tools.py": ("def via_helper_module():\n    import reach_pkg.c\n"),
            "reach_pkg/env.py": plain_env_module(
                "ReachEnv",
                header="from reach_pkg import tools\n",
                footer=(
                    "\ndef _global_target():\n    import reach_pkg.a\n\n\n"
                    "def _default_target():\n    import reach_pkg.b\n\n\n"
                    "def _make(value=_default_target):\n"
                    "    def method(self):\n"
                    "        _global_target()\n"
                    "        tools.via_helper_module()\n"
                    "        return value\n"
                    "    return method\n\n\n"
                    "ReachEnv.method = _make()\n"
                ),
            ),
        },
    )
    env_module = project.module("reach_pkg.env")

    with pytest.raises(BundlingError) as caught:
        dump_bundle(env_module.ReachEnv)
    assert "safely: reach_pkg.a, reach_pkg.b, reach_pkg.c. " in str(caught.value)


def test_relative_method_local_import_is_resolved_and_refused(projects: ProjectFactory) -> None:
    project = _local_import_project(projects, "    from . import helper\n    return helper.VALUE")
    env_module = project.module("local_import_pkg.env")

    with pytest.raises(BundlingError) as caught:
        dump_bundle(env_module.LocalImportEnv)
    assert "safely: local_import_pkg, local_import_pkg.helper. " in str(caught.value)


def test_method_local_import_of_stdlib_and_installed_packages_is_fine(
    projects: ProjectFactory,
) -> None:
    project = _local_import_project(
        projects,
        "    import json\n    import importlib\n    import packaging.version\n"
        '    importlib.import_module("email.utils")\n'
        '    return json.loads("1") + float(packaging.version.Version("1").major)',
    )
    env_module = project.module("local_import_pkg.env")

    bundle = dump_bundle(env_module.LocalImportEnv)

    env_class, _ = load_bundle(bundle, instantiate=False)
    assert env_class().score() == 2.0


def test_delayed_import_covered_by_a_declared_distribution_is_fine(
    sibling_projects: tuple[Project, Project], projects: ProjectFactory
) -> None:
    project = _local_import_project(
        projects, "    import sibling_helpers.helper as helper\n    return helper.VALUE"
    )
    env_module = project.module("local_import_pkg.env")

    with pytest.raises(BundlingError, match=r"delayed import.*sibling_helpers\.helper"):
        dump_bundle(env_module.LocalImportEnv)
    bundle = dump_bundle(env_module.LocalImportEnv, pip_dependencies=["sibling-helpers"])
    assert bundle.metadata.pip_dependencies == ("sibling-helpers",)


def test_unreferenced_function_with_a_local_import_is_not_an_error(
    projects: ProjectFactory,
) -> None:
    project = projects.create(
        "unused-import",
        {
            "unused_pkg/__init__.py": "",
            "unused_pkg/helper.py": "VALUE = 1.0\n",
            "unused_pkg/env.py": plain_env_module(
                "UnusedEnv",
                footer=(
                    "\n\ndef never_called():\n"
                    "    import unused_pkg.helper as helper\n"
                    "    return helper.VALUE\n"
                ),
            ),
        },
    )
    env_module = project.module("unused_pkg.env")

    bundle = dump_bundle(env_module.UnusedEnv)

    assert len(bundle.pickled) > 0


def test_second_dump_is_identical_and_the_live_class_keeps_working(
    chat_project: Project,
) -> None:
    env_module = chat_project.module("chat_pkg.env")
    env_class = env_module.ChatEnv
    members_before = dict(vars(env_class))

    first = dump_bundle(env_class)
    second = dump_bundle(env_class)

    assert first.pickled == second.pickled
    assert dict(vars(env_class)) == members_before
    assert env_class.compute_reward is members_before["compute_reward"]
    assert env_class().helper_value() == 0.75


def test_same_process_load_returns_a_working_class(chat_project: Project) -> None:
    env_module = chat_project.module("chat_pkg.env")

    env = load_bundle(dump_bundle(env_module.ChatEnv))

    assert type(env).__name__ == "ChatEnv"
    assert env.helper_value() == 0.75


def test_pickled_bundle_object_round_trips_in_process(chat_project: Project) -> None:
    bundle = dump_bundle(chat_project.module("chat_pkg.env").ChatEnv)

    assert pickle.loads(pickle.dumps(bundle)) == bundle


def test_import_module_imported_at_module_scope_is_recognized(projects: ProjectFactory) -> None:
    project = projects.create(
        "from-importlib",
        {
            "fi_pkg/__init__.py": "",
            "fi_pkg/helper.py": "VALUE = 1.0\n",
            "fi_pkg/env.py": plain_env_module(
                "FromImportlibEnv",
                header="from importlib import import_module\n",
                footer=(
                    "\ndef _score(self):\n"
                    '    return import_module("fi_pkg.helper").VALUE\n\n\n'
                    "FromImportlibEnv.score = _score\n"
                ),
            ),
        },
    )
    env_module = project.module("fi_pkg.env")

    with pytest.raises(BundlingError, match=r"safely: fi_pkg\.helper\. "):
        dump_bundle(env_module.FromImportlibEnv)


def test_delayed_import_check_runs_without_auto_capture(projects: ProjectFactory) -> None:
    project = _local_import_project(
        projects, "    import local_import_pkg.helper as helper\n    return helper.VALUE"
    )
    env_module = project.module("local_import_pkg.env")
    helper = project.module("local_import_pkg.helper")

    with pytest.raises(BundlingError, match=r"delayed import.*local_import_pkg\.helper"):
        dump_bundle(
            env_module.LocalImportEnv,
            local_modules=[env_module, helper],
            auto_local_modules=False,
        )
