"""Module classification seams: project roots and project-local source."""

from __future__ import annotations

import sys
from pathlib import Path

import cloudpickle
import openai
import pytest
from tests.bundle.conftest import ProjectFactory, plain_env_module

import benchmax.bundle
from benchmax.bundle import (
    BundlingError,
    _module_is_project_local,
    _project_root_for_module,
    dump_bundle,
    unregistered_local_refs,
)

REPOSITORY = Path(__file__).resolve().parents[2]
THIS_MODULE = sys.modules[__name__]


@pytest.fixture
def roots() -> tuple[Path, ...]:
    root = _project_root_for_module(THIS_MODULE)
    assert root is not None
    return (root,)


def test_project_root_of_a_repository_module_is_the_repository() -> None:
    assert _project_root_for_module(THIS_MODULE) == REPOSITORY


def test_repository_module_is_project_local(roots: tuple[Path, ...]) -> None:
    assert _module_is_project_local(__name__, roots)
    assert not _module_is_project_local(__name__, ())


@pytest.mark.parametrize("name", ["benchmax.bundle", "benchmax", "pathlib", "json.decoder"])
def test_stdlib_and_benchmax_are_never_project_local(roots: tuple[Path, ...], name: str) -> None:
    assert not _module_is_project_local(name, roots)


def test_site_packages_under_the_project_root_is_not_project_local(
    roots: tuple[Path, ...],
) -> None:
    assert not _module_is_project_local("openai", roots)
    assert _project_root_for_module(openai) is None or not Path(openai.__file__).is_relative_to(
        REPOSITORY / ".venv"
    )


def test_unfindable_names_are_not_project_local(roots: tuple[Path, ...]) -> None:
    assert not _module_is_project_local("no_such_module_anywhere", roots)
    assert not _module_is_project_local("tests.bundle.no_such_submodule", roots)
    assert not _module_is_project_local("", roots)


def test_unimported_modules_are_classified_without_executing_them(
    projects: ProjectFactory,
) -> None:
    project = projects.create(
        "lazy", {"lazy_pkg/__init__.py": "", "lazy_pkg/boom.py": "raise RuntimeError('ran')\n"}
    )
    assert _module_is_project_local("lazy_pkg.boom", (project.root,))
    assert not _module_is_project_local("lazy_pkg.boom", (REPOSITORY,))
    assert "lazy_pkg.boom" not in sys.modules


def test_namespace_packages_have_paths(projects: ProjectFactory) -> None:
    project = projects.create("namespace", {"ns_pkg/part.py": "X = 1\n"})
    assert _module_is_project_local("ns_pkg", (project.root,))


def test_project_root_is_the_nearest_pyproject(projects: ProjectFactory) -> None:
    outer = projects.create("outer", {"outer_mod.py": "X = 1\n"}, src_layout=False)
    nested = outer.root / "nested"
    nested.mkdir()
    (nested / "pyproject.toml").write_text("[project]\nname='nested'\n")
    (nested / "nested_mod.py").write_text("X = 2\n")
    sys.path.insert(0, str(nested))
    try:
        import nested_mod  # type: ignore[import-not-found]

        assert _project_root_for_module(nested_mod) == nested
    finally:
        sys.path.remove(str(nested))
        sys.modules.pop("nested_mod", None)
    assert _project_root_for_module(outer.module("outer_mod")) == outer.root
    assert _project_root_for_module(sys) is None
    assert _project_root_for_module("not a module") is None  # type: ignore[arg-type]


def test_unregistered_local_refs_infers_roots_from_the_pickle(projects: ProjectFactory) -> None:
    project = projects.create("refs", {"refs_env.py": plain_env_module("RefsEnv")})
    module = project.module("refs_env")

    assert unregistered_local_refs(cloudpickle.dumps(module.RefsEnv)) == ["refs_env"]
    assert unregistered_local_refs(cloudpickle.dumps((module, module.RefsEnv))) == ["refs_env"]
    assert unregistered_local_refs(dump_bundle(module.RefsEnv).pickled) == []
    assert unregistered_local_refs(b"garbage") == []
    with pytest.raises(TypeError):
        unregistered_local_refs("text")  # type: ignore[arg-type]


def test_patched_classification_seam_is_used_by_dump(
    monkeypatch: pytest.MonkeyPatch, projects: ProjectFactory
) -> None:
    project = projects.create("seam", {"seam_env.py": plain_env_module("SeamEnv")})
    module = project.module("seam_env")
    monkeypatch.setattr("benchmax.bundle._module_is_project_local", lambda name, roots: False)

    bundle = dump_bundle(module.SeamEnv)

    monkeypatch.undo()
    assert unregistered_local_refs(bundle.pickled) == ["seam_env"]
    assert benchmax.bundle._module_is_project_local is _module_is_project_local


def test_patched_root_seam_is_used_by_dump(
    monkeypatch: pytest.MonkeyPatch, projects: ProjectFactory
) -> None:
    project = projects.create("rootless", {"rootless_env.py": plain_env_module("RootlessEnv")})
    module = project.module("rootless_env")
    monkeypatch.setattr("benchmax.bundle._project_root_for_module", lambda module: None)

    with pytest.raises(BundlingError, match="outside the environment project: rootless_env"):
        dump_bundle(module.RootlessEnv)


def test_replay_continues_past_unresolvable_classes(projects: ProjectFactory) -> None:
    projects.create("replay", {"replay_env.py": plain_env_module("ReplayEnv")})
    pytest.importorskip("replay_env")
    # Protocol 0 by hand: call a class that cannot be imported, call the resulting instance,
    # then reference a project-local class.
    data = b"(cno_such_module_for_replay\nThing\n(I1\ntR(I2\ntRcreplay_env\nReplayEnv\nt."

    assert unregistered_local_refs(data) == ["replay_env"]
