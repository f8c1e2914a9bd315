"""Fixtures for bundle tests: real throwaway projects on disk and fresh interpreters.

``projects`` writes small Python projects (a ``pyproject.toml``, modules, optionally a
``.dist-info`` so they look installed) under ``tmp_path`` and puts their import directory on
``sys.path``; after the test, ``sys.path``, the imported modules and cloudpickle's by-value
registry are checked or restored. ``run_fresh`` runs a script in a new ``python -I``
interpreter started in an empty directory, where none of those projects is importable.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import cloudpickle
import pytest

# A concrete environment written directly against ``Environment`` (no model calls).
PLAIN_ENV_HEADER = """\
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import Example, RolloutAttempt
"""

PLAIN_ENV_CLASS = """\
class {name}(Environment):
    reward_keys = ("score",)

    def __init__(self, **options):
        self.options = options

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([Example(id="example-1", payload="hello")])

    async def run_rollout(self, request):
        return RolloutAttempt(
            rollout_id=request.rollout_id, termination_reason="finished", rewards={{"score": 1.0}}
        )
"""

# A BaseEnv subclass scored with a value from a helper module held as a module object.
CHAT_ENV_MODULE = """\
from benchmax.envs.base.env import BaseEnv
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example

from . import helper


class {name}(BaseEnv):
    reward_keys = ("score",)
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        payload = {{
            "prompt_messages": [{{"role": "user", "content": "say hello"}}],
            "answer": "say hello",
        }}
        return Dataset([Example(id="example-1", payload=payload)])

    async def compute_reward(self, rollout):
        reply = rollout.messages[-1]["content"]
        matched = reply == rollout.example_args["answer"]
        return {{"score": helper.VALUE if matched else 0.0}}

    def helper_value(self):
        return helper.VALUE
"""


@dataclass
class Project:
    """One throwaway project: ``root`` holds ``pyproject.toml``; ``import_dir`` is on sys.path."""

    root: Path
    import_dir: Path
    packages: list[str] = field(default_factory=list)

    def module(self, name: str) -> ModuleType:
        """Import ``name`` from this project."""
        return importlib.import_module(name)


class ProjectFactory:
    """Creates projects under one base directory and undoes their import side effects."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._saved_path = list(sys.path)
        self._top_level: set[str] = set()

    def create(
        self,
        name: str,
        files: dict[str, str],
        *,
        src_layout: bool = True,
        distribution: str | None = None,
        top_level: tuple[str, ...] = (),
    ) -> Project:
        """Write a project; ``distribution`` adds a ``<name>-1.0.0.dist-info`` naming it."""
        root = self.base / name
        root.mkdir(parents=True)
        (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "1.0.0"\n')
        import_dir = root / "src" if src_layout else root
        import_dir.mkdir(exist_ok=True)
        for relative, text in files.items():
            path = import_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
            self._top_level.add(Path(relative).parts[0].removesuffix(".py"))
        if distribution is not None:
            info = import_dir / f"{distribution.replace('-', '_')}-1.0.0.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0.0\n"
            )
            (info / "top_level.txt").write_text("".join(f"{t}\n" for t in top_level))
        sys.path.insert(0, str(import_dir))
        importlib.invalidate_caches()
        return Project(root=root, import_dir=import_dir, packages=sorted(self._top_level))

    def cleanup(self) -> None:
        sys.path[:] = self._saved_path
        for name in list(sys.modules):
            if name.partition(".")[0] in self._top_level:
                del sys.modules[name]
        for key in list(sys.path_importer_cache):
            if key.startswith(str(self.base)):
                del sys.path_importer_cache[key]
        importlib.invalidate_caches()


@pytest.fixture
def projects(tmp_path: Path) -> Iterator[ProjectFactory]:
    """Factory for throwaway projects; sys.path and sys.modules are restored afterwards."""
    factory = ProjectFactory(tmp_path / "projects")
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture(autouse=True)
def by_value_registry_untouched() -> Iterator[None]:
    """Every test must leave cloudpickle's by-value registry exactly as it found it."""
    before = cloudpickle.list_registry_pickle_by_value()
    yield
    assert cloudpickle.list_registry_pickle_by_value() == before


def plain_env_module(*class_names: str, header: str = "", footer: str = "") -> str:
    """Source of a module defining plain ``Environment`` subclasses."""
    classes = "\n\n".join(PLAIN_ENV_CLASS.format(name=name) for name in class_names)
    return f"{PLAIN_ENV_HEADER}{header}\n\n{classes}\n{footer}"


@pytest.fixture
def chat_project(projects: ProjectFactory) -> Project:
    """An editable-looking src-layout project: ``chat_pkg.env.ChatEnv`` + ``chat_pkg.helper``."""
    return projects.create(
        "chat-project",
        {
            "chat_pkg/__init__.py": "",
            "chat_pkg/helper.py": "VALUE = 0.75\n",
            "chat_pkg/env.py": CHAT_ENV_MODULE.format(name="ChatEnv"),
        },
        distribution="chat-pkg",
        top_level=("chat_pkg",),
    )


@dataclass(frozen=True)
class FreshRun:
    """Result of a fresh-interpreter run: its return code, output and last JSON line."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def result(self) -> Any:
        assert self.returncode == 0, self.stderr
        return json.loads(self.stdout.strip().splitlines()[-1])


@pytest.fixture
def run_fresh(tmp_path: Path) -> Any:
    """Run a script in ``python -I`` (this venv) in an empty directory without PYTHONPATH."""
    empty = tmp_path / "fresh-cwd"
    empty.mkdir()

    def run(script: str, *args: str, timeout: float = 60) -> FreshRun:
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        completed = subprocess.run(
            [sys.executable, "-I", "-c", textwrap.dedent(script), *args],
            cwd=empty,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return FreshRun(completed.returncode, completed.stdout, completed.stderr)

    return run


SIBLING_ENV = plain_env_module("SiblingEnv", header="from sibling_helpers import helper\n").replace(
    '{"score": 1.0}', '{"score": float(helper.VALUE)}'
) + (
    "\n\ndef helper_value(self):\n    return helper.VALUE\n\n\n"
    "SiblingEnv.helper_value = helper_value\n"
)


@pytest.fixture
def sibling_projects(projects: ProjectFactory) -> tuple[Project, Project]:
    """Env project ``a`` (``sibling_env.env``) using helpers of the installed-looking ``b``."""
    helpers = projects.create(
        "b",
        {"sibling_helpers/__init__.py": "", "sibling_helpers/helper.py": "VALUE = 0.5\n"},
        distribution="sibling-helpers",
        top_level=("sibling_helpers",),
    )
    env = projects.create("a", {"sibling_env/__init__.py": "", "sibling_env/env.py": SIBLING_ENV})
    return env, helpers


@pytest.fixture
def single_file_project(projects: ProjectFactory) -> Project:
    """An editable-looking single-file project: ``strict_env.EditableEnv``."""
    return projects.create(
        "strict-project",
        {"strict_env.py": plain_env_module("EditableEnv")},
        src_layout=False,
        distribution="strict-env",
        top_level=("strict_env",),
    )
